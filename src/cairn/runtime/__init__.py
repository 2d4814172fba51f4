"""The runtime: what a running process needs that is neither the pure core nor a surface.

Turning a home directory into a store and a principal (``local``), the layered settings
(``settings``), the working directory's git checkout (``gitinfo``), and the clients that reach a
service elsewhere: the local daemon (``client`` for one operation, ``forward`` for a whole command)
and a remote server over HTTP (``remote``). The surfaces (CLI, hooks, daemon, MCP, the Python API)
start here; ``core`` never imports it.

Importing this package loads nothing: the hooks' and the CLI's start-up import single modules of it.
"""
