"""Cairn: a versioned, audited memory store for coding agents.

The package is layered (see docs/architecture.md): ``cairn.core`` is pure, ``cairn.store`` owns
the schema and the one SQL layer, ``cairn.service`` performs every operation in one transaction,
and ``cairn.cli`` (and later surfaces) only parse, call and format.
"""

__version__ = "0.1.0"
