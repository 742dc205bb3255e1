"""The event-log contract (``condensate.testing.eventlog``) on a real PostgreSQL server
(``tests.integration.postgres``), a fresh database per test; and what only a fleet's shared
log does: a thread a daemon holds is not archived around it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from condensate.errors import EventLogError
from condensate.eventlog import EventStore, archive
from condensate.eventlog.postgres import PostgresStore
from condensate.testing.builders import finished_thread
from condensate.testing.eventlog import EventLogContract, put

_TABLES = ("events", "snapshots", "threads")


class TestPostgresEventLog(EventLogContract):
    refusals = (psycopg.Error,)
    version_1 = (
        "DROP TABLE archives",
        "DROP TRIGGER events_not_archived ON events",
        "DROP TRIGGER threads_not_archived ON threads",
        *(
            statement
            for table in _TABLES
            for statement in (
                f"DROP TRIGGER {table}_delete_archived_only ON {table}",
                f"CREATE OR REPLACE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}"
                " FOR EACH ROW EXECUTE FUNCTION condensate_refuse_change()",
            )
        ),
        "UPDATE condensate_schema SET version = 1",
    )

    @pytest.fixture
    def database(self, postgres_url: str) -> str:
        return postgres_url

    async def open_store(self, database: str) -> EventStore:
        return await PostgresStore.connect(database)

    def execute(self, database: str, statement: str, params: tuple[Any, ...]) -> None:
        with psycopg.connect(database, autocommit=True) as connection:
            connection.execute(statement, params)


async def test_a_thread_another_daemon_holds_is_not_archived_around_it(
    postgres_url: str, tmp_path: Path
) -> None:
    """On a fleet's log, a store without an owner (the command line) cannot archive a thread
    whose lease a daemon holds: the refusal names the daemon, and nothing is removed."""
    store = await PostgresStore.connect(postgres_url)
    try:
        await put(store, "t", *finished_thread("one"))
        assert await store.claim("t", "host-a:/srv", "http://10.0.0.1:4741", 60.0)
        with pytest.raises(
            EventLogError, match=r"owned by daemon host-a:/srv at http://10\.0\.0\.1:4741"
        ):
            await archive.archive_thread(store, "t", tmp_path / "archive")
        assert (await store.last_seq("t"), await store.archived("t")) == (5, None)
        assert not (tmp_path / "archive" / "t.db").exists()
    finally:
        await store.close()
