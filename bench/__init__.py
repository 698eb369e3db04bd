"""Benchmarks that print figures; nothing here asserts on wall time."""
