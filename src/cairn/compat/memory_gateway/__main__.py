"""``python -m cairn.compat.memory_gateway`` is the ``memory-gateway`` command."""

from cairn.compat.memory_gateway.cli import entry

entry()
