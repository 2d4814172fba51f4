"""Alembic migrations. ``HEAD`` lets the store check the schema without importing alembic.

Importing alembic costs tens of milliseconds, and ``cairn`` runs on every agent session start, so
the store compares ``alembic_version`` against ``HEAD`` with one query and only loads alembic when
an upgrade is actually due. A test keeps ``HEAD`` equal to the newest revision.
"""

HEAD = "0013"
