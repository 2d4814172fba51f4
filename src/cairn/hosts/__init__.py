"""Host integrations: the hook entry (``cairn hook``) and the installers (``cairn install``).

A host is an agent runtime that runs shell commands at lifecycle events and reads what they print:
Claude Code, Cursor and Codex. Everything here is a surface in the sense of ``docs/architecture.md``:
it parses the host's JSON, calls one operation through :mod:`cairn.runtime.client`, and prints the answer in
the shape the host expects. No rule about lessons lives here.

Hooks run on every session start and every failed tool call, so every module in this package imports
only the standard library at module top; the store and the model load (in-process, or not at all when
the ``cairn serve`` daemon answers) only once a hook has something to ask.

See ``docs/hosts.md`` for what is installed where, per host, and the protocol facts behind it.
"""

from __future__ import annotations

HOSTS = ("claude-code", "cursor", "codex")
EVENTS = ("session-start", "prompt-submit", "tool-failure")
