"""A real daemon on the PostgreSQL event log (``CONDENSATE_DATABASE_URL``): its threads live
in the database, not in a file beside it, and a SIGKILLed daemon's successor rebuilds each
thread's view from the database exactly."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import anyio
import psycopg

from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.daemon import DaemonProcess, call, wait_for

MODEL = "anthropic:claude-sonnet-4-5"


async def test_a_thread_on_postgres_is_rebuilt_exactly_after_a_kill(
    tmp_path: Path, fake: FakeModelServer, postgres_url: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the parser keeps its state in a table\n")
    fake.queue(ToolCalls([Call("read", {"path": "notes.txt"})]), Text("read it"))
    home = tmp_path / "home"
    home.mkdir()
    env = {"CONDENSATE_DATABASE_URL": postgres_url}
    daemon = DaemonProcess(home, fake.url, extra_env=env)
    await anyio.to_thread.run_sync(daemon.start)
    try:
        async with aiohttp.ClientSession() as session:
            status, created = await call(
                session,
                daemon,
                "POST",
                "/threads",
                {"engine": "api", "model": MODEL, "cwd": str(work), "brief": "Read notes.txt."},
            )
            assert status == 201, created
            thread = created["id"]
            events = await wait_for(session, daemon, thread, lambda e: e["kind"] == "turn.ended")
            _, before = await call(session, daemon, "GET", f"/threads/{thread}")
            daemon.kill()
            await anyio.to_thread.run_sync(daemon.start)
            _, after = await call(session, daemon, "GET", f"/threads/{thread}")
            _, page = await call(
                session, daemon, "GET", f"/threads/{thread}/tail?history=1&limit=1000"
            )
    finally:
        await anyio.to_thread.run_sync(daemon.close)

    assert not (home / "condensate.db").exists()
    with psycopg.connect(postgres_url) as connection:
        rows = connection.execute(
            "SELECT seq, kind FROM events WHERE thread_id = %s ORDER BY seq", (thread,)
        ).fetchall()
    assert [kind for _, kind in rows[: len(events)]] == [e["kind"] for e in events]
    assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))
    assert [e["seq"] for e in page["events"]] == [seq for seq, _ in rows]
    for key in ("events", "usage", "costs", "line", "ceiling"):
        assert after[key] == before[key], key
    assert "read it" in [e.get("text") for e in events]
