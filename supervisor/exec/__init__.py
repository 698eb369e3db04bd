"""What runs instead of a worker process for a moment: the exec wrapper and its helpers."""
