"""The event-log contract (``condensate.testing.eventlog``) on SQLite, in a temporary file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from condensate.eventlog import EventStore
from condensate.eventlog.sqlite import SqliteStore
from condensate.testing.eventlog import EventLogContract

_DROPPED = (
    "events_delete_archived_only",
    "snapshots_delete_archived_only",
    "threads_delete_archived_only",
    "events_not_archived",
    "threads_not_archived",
)


class TestSqliteEventLog(EventLogContract):
    refusals = (sqlite3.Error,)
    version_1 = (
        *(f"DROP TRIGGER {name}" for name in _DROPPED),
        "DROP TABLE archives",
        *(
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}"
            " BEGIN SELECT RAISE(ABORT, 'append-only'); END"
            for table in ("events", "snapshots", "threads")
        ),
        "PRAGMA user_version = 1",
    )

    @pytest.fixture
    def database(self, tmp_path: Path) -> str:
        return str(tmp_path / "log.db")

    async def open_store(self, database: str) -> EventStore:
        return SqliteStore.open(Path(database))

    def execute(self, database: str, statement: str, params: tuple[Any, ...]) -> None:
        with sqlite3.connect(database) as connection:
            connection.execute(statement.replace("%s", "?"), params)
