"""The human dashboard: server-rendered pages over the service, mounted at ``/ui``."""

from __future__ import annotations

from cairn.web.app import create_web

__all__ = ["create_web"]
