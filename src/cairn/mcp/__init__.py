"""MCP surface: see ``server.build``."""
