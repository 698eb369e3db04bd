"""The supervisor's actors: each owns its state and talks only through memory object streams."""
