"""Column types shared by both databases.

Time is stored as naive UTC and handed back as aware UTC: SQLite has no time zone type, Postgres
``timestamp`` compares the same way, and keeping the conversion here means no other module ever
sees a naive datetime.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, DateTime, Integer
from sqlalchemy.types import TypeDecorator

# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY.
IdType = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use cairn.core.timeparse.utcnow()")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)
