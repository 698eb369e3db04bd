"""Developer tools: code generated from the operation declarations."""
