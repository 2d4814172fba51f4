"""LoreKit's remote protocol and local store over Cairn's service (docs/lorekit.md).

LoreKit's users point its CLI, hooks and MCP clients at ``cairn serve`` and keep working; their
memories gain Cairn's versions, tombstones, trust states, ranked reads and tenancy.

Modules: ``fields`` (LoreKit's row and fields in Cairn's terms), ``ops`` (each LoreKit operation
as service calls, LoreKit's limits and error kinds), ``rest`` (the REST subset and the mount),
``rpc`` (the MCP JSON-RPC surface), ``importer`` (LoreKit's local Markdown store into Cairn).
"""
