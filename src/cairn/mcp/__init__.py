"""MCP surface (issue 6): see ``server.build``."""
