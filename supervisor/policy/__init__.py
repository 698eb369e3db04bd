"""Pure decisions of the supervisor: rows, evidence and `now` in; frozen results out."""
