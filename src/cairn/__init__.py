"""Cairn: a versioned, audited memory store for coding agents.

The package is layered (see docs/architecture.md): ``cairn.core`` is pure, ``cairn.store`` owns
the schema and the one SQL layer, ``cairn.service`` performs every operation in one transaction,
and ``cairn.cli`` (and later surfaces) only parse, call and format.

As a library (docs/python-api.md)::

    import cairn

    with cairn.open() as memory:  # ~/.cairn, or $CAIRN_HOME, or cairn.open(home=...)
        memory.write("repo::acme/widget", "docker-cache", "Rebuild with --no-cache after lockfile changes")
        memory.search("stale docker cache", repo="acme/widget")

``import cairn`` loads nothing but this file: the names below resolve on first use, so the CLI's
and the hooks' start-up pays nothing for them.
"""

TYPE_CHECKING = False  # not typing's: the hooks import this package, and typing costs milliseconds
if TYPE_CHECKING:
    from cairn.errors import CairnError
    from cairn.library import Memory, open

__version__ = "0.1.0"
__all__ = ["CairnError", "Memory", "__version__", "open"]

# public name -> the module that defines it
_LAZY = {"open": "cairn.library", "Memory": "cairn.library", "CairnError": "cairn.errors"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cairn' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
