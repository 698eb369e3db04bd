"""Tests of the ``clients`` command: MCP client config discovery, wrap and unwrap."""
