"""Tests for the database layer (real SQLite files under tmp_path)."""
