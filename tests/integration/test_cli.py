"""The ``condensate`` command as real subprocesses against a real daemon on loopback: listing,
status bars, tail (once and following), run (following and detached), compact (preview and
answers), doctor without a daemon, and the error when there is no daemon to talk to.

The fake model server runs on its own thread and the subprocesses are awaited through anyio,
so the test's event loop never blocks while a command runs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from condensate.client import DaemonClient
from condensate.testing.fake_model import Call, Fail, FakeModelServer, Text, ToolCalls
from tests.integration.daemon import REPO, DaemonProcess, call

MODEL = "anthropic:claude-sonnet-4-5"


# -- fixtures and helpers ----------------------------------------------------------------------


def _marker() -> str:
    return uuid.uuid4().hex[:10]


def _settle(client: DaemonClient, thread: str, seconds: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        shown: dict[str, Any] = client.call("GET", f"/threads/{thread}")
        if shown["status"] == "idle":
            return shown
        time.sleep(0.05)
    msg = f"Thread {thread} still runs after {seconds} s."
    raise AssertionError(msg)


def _new_thread(daemon: DaemonProcess, brief: str) -> str:
    """A thread started over HTTP, its first turn over."""
    client = DaemonClient(daemon.url, daemon.token)
    body = {"model": MODEL, "cwd": str(daemon.home), "brief": brief}
    thread = str(client.call("POST", "/threads", body)["id"])
    _settle(client, thread)
    return thread


async def new_thread(daemon: DaemonProcess, brief: str) -> str:
    return await anyio.to_thread.run_sync(_new_thread, daemon, brief)


async def settle(daemon: DaemonProcess, thread: str) -> dict[str, Any]:
    client = DaemonClient(daemon.url, daemon.token)
    return await anyio.to_thread.run_sync(_settle, client, thread)


@pytest.fixture(scope="module")
def thread(daemon: DaemonProcess) -> str:
    """A settled thread the read-only commands look at."""
    return _new_thread(daemon, f"the shared brief {_marker()}")


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    env["CONDENSATE_HOME"] = str(home)
    env.update(extra)
    return env


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "condensate", *args]


async def condensate(
    home: Path, *args: str, seconds: float = 30.0, **env: str
) -> tuple[int, str, str]:
    """Runs ``condensate ARGS`` with CONDENSATE_HOME=home (and ``env``); its exit code, stdout
    and stderr."""
    with anyio.fail_after(seconds):
        done = await anyio.run_process(
            _command(*args), cwd=REPO, env=_env(home, **env), check=False
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- listing and status ------------------------------------------------------------------------


async def test_threads_json_lists_the_threads(daemon: DaemonProcess, thread: str) -> None:
    """`threads --json` prints the daemon's thread list as one JSON object."""
    code, out, err = await condensate(daemon.home, "threads", "--json")
    assert code == 0, err
    data = json.loads(out)
    listed = {t["id"]: t for t in data["threads"]}
    assert thread in listed
    assert listed[thread]["status"] == "idle"
    assert listed[thread]["model"] == MODEL


async def test_threads_text_has_a_row_per_thread(daemon: DaemonProcess, thread: str) -> None:
    """`threads` prints one row per thread naming its id, its title (the brief's first line),
    engine, status, model and cwd: what tells threads apart."""
    code, out, err = await condensate(daemon.home, "threads")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith(thread)]
    assert "the shared brief" in row
    assert "api" in row
    assert "idle" in row
    assert MODEL in row
    async with aiohttp.ClientSession() as session:
        _, shown = await call(session, daemon, "GET", f"/threads/{thread}")
    assert shown["title"].startswith("the shared brief")
    assert shown["cwd"] in row


async def test_status_shows_a_usage_bar(daemon: DaemonProcess, thread: str) -> None:
    """`status` prints each thread's usage against its line as a bar with a percentage."""
    code, out, err = await condensate(daemon.home, "status")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith(thread)]
    assert re.search(r"\[[#.]{30}\]\s+\d+%\s+[\d,]+/[\d,]+", row), row


async def test_status_says_why_a_heads_line_is_above_its_ceiling(
    daemon: DaemonProcess, tmp_path: Path, thread: str
) -> None:
    """A head started with `run --head` is a head, and `status` says why its line stands
    above the working ceiling; an ordinary thread's row says nothing of the kind."""
    brief = f"a head {_marker()}"
    args = ["run", "--model", MODEL, "--cwd", str(tmp_path), "--head", "--detach", "--json"]
    code, out, err = await condensate(daemon.home, *args, brief)
    assert code == 0, err
    head = json.loads(out)
    assert head["head"] is True
    assert head["line"] > head["ceiling"]
    await settle(daemon, head["id"])
    code, out, err = await condensate(daemon.home, "status")
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("t-")}
    assert "head: line is the window" in rows[head["id"]], rows[head["id"]]
    assert "head:" not in rows[thread]


# -- tail ------------------------------------------------------------------------------------


async def test_tail_json_prints_a_page(daemon: DaemonProcess, thread: str) -> None:
    """`tail THREAD --json` prints a page: events with seq and kind, nextAfter, hasMore."""
    code, out, err = await condensate(daemon.home, "tail", thread, "--json")
    assert code == 0, err
    page = json.loads(out)
    assert set(page) == {"events", "nextAfter", "hasMore"}
    assert page["hasMore"] is False
    seqs = [e["seq"] for e in page["events"]]
    assert seqs == list(range(1, len(seqs) + 1))
    assert page["nextAfter"] == seqs[-1]
    kinds = [e["kind"] for e in page["events"]]
    assert kinds[:3] == ["thread.created", "message.user", "turn.started"]
    assert kinds[-1] == "turn.ended"


async def test_tail_text_prints_a_line_per_event(daemon: DaemonProcess, thread: str) -> None:
    """`tail THREAD` prints one line per event with its seq and kind."""
    code, out, err = await condensate(daemon.home, "tail", thread, "--limit", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2
    assert re.match(r"\s*1 thread\.created", lines[0]), lines[0]
    assert re.match(r"\s*2 message\.user\s+the shared brief", lines[1]), lines[1]


async def test_tail_follow_prints_new_events(
    daemon: DaemonProcess, session: aiohttp.ClientSession
) -> None:
    """`tail -f THREAD` keeps printing events as they are logged."""
    followed = await new_thread(daemon, f"follow me {_marker()}")
    last = (await settle(daemon, followed))["events"]
    steer = f"a steer to follow {_marker()}"
    seen: list[dict[str, Any]] = []
    process = await anyio.open_process(
        _command("tail", followed, "-f", "--json"), cwd=REPO, env=_env(daemon.home)
    )
    async with process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        try:
            with anyio.fail_after(20):
                while not seen or seen[-1]["seq"] < last:
                    seen.append(json.loads(await lines.receive_until(b"\n", 1 << 20)))
                status, body = await call(
                    session, daemon, "POST", f"/threads/{followed}/messages", {"text": steer}
                )
                assert status == 202, body
                while seen[-1].get("text") != steer:
                    seen.append(json.loads(await lines.receive_until(b"\n", 1 << 20)))
        finally:
            process.kill()
            await process.wait()
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    assert seen[-1]["seq"] == body["seq"]
    await settle(daemon, followed)


# -- run -------------------------------------------------------------------------------------


async def test_run_follows_until_the_turn_ends(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """`run --model M --cwd DIR BRIEF` starts a thread, prints its events until its turn ends,
    and exits 0."""
    answer = f"all done {_marker()}"
    fake.queue(Text(answer))
    brief = f"run me {_marker()}"
    code, out, err = await condensate(
        daemon.home, "run", "--model", MODEL, "--cwd", str(tmp_path), brief
    )
    assert code == 0, err
    match = re.search(r"thread (t-[0-9a-f]{12})", err)
    assert match, err
    lines = out.splitlines()
    assert f"> {brief}" in lines, out
    assert answer in lines, out
    assert lines[-2] == "── turn completed", out
    assert re.search(r"\d+%\s+[\d,]+/[\d,]+\s+\$\d+\.\d{4} \(1 calls\)", lines[-1]), lines[-1]
    assert "\033[" not in out  # piped: plain text
    shown = await settle(daemon, match.group(1))
    assert shown["cwd"] == str(tmp_path)


async def test_run_shows_each_tool_call_and_how_it_ended(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A call is shown as it is made, its result as it comes back (a failure marked)."""
    fake.queue(
        ToolCalls([Call("shell", {"command": "echo made-it"})]),
        ToolCalls([Call("read", {"path": "missing.txt"})]),
        Text("Finished."),
    )
    code, out, err = await condensate(
        daemon.home, "run", "--model", MODEL, "--cwd", str(tmp_path), f"tools {_marker()}"
    )
    assert code == 0, err
    assert '  ⚙ shell {"command": "echo made-it"}' in out
    assert re.search(r"  ✓ shell\(echo made-it\): .*made-it", out), out
    assert '  ⚙ read {"path": "missing.txt"}' in out
    assert "  ✗ read(missing.txt): " in out


async def test_a_failed_turn_exits_1_with_its_whole_reason(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """A provider that refuses the key fails the turn: `run` exits 1 and says why, whole,
    naming the setting that holds the key, once (on stderr; the turn's end line on stdout
    and the provider's error line before it do not repeat it)."""
    fake.queue(Fail(401))
    code, out, err = await condensate(
        daemon.home, "run", "--model", MODEL, "--cwd", str(tmp_path), f"fails {_marker()}"
    )
    assert code == 1, (out, err)
    (said,) = [line for line in err.splitlines() if line.startswith("condensate: ")]
    assert said.startswith("condensate: the turn failed: anthropic answered 401: ")
    assert said.endswith(
        "(the daemon's CONDENSATE_ANTHROPIC_API_KEY: condensate config shows where it is set)"
    )
    assert "── turn failed" in out.splitlines()
    assert (out + err).count("anthropic answered 401") == 1, (out, err)


async def test_send_wait_follows_the_turn_it_starts(
    daemon: DaemonProcess, fake: FakeModelServer, thread: str
) -> None:
    """`send THREAD TEXT --wait` steers the thread and follows the turn until it ends."""
    answer = f"steered {_marker()}"
    fake.queue(Text(answer))
    code, out, err = await condensate(daemon.home, "send", thread, "Go on, please.", "--wait")
    assert code == 0, err
    assert answer in out.splitlines()
    assert "── turn completed" in out
    code, out, err = await condensate(daemon.home, "send", thread, "And now?", "--json")
    assert code == 0, err
    assert set(json.loads(out)) == {"seq", "thread"}
    await settle(daemon, thread)


async def test_threads_quiet_prints_the_ids_alone(daemon: DaemonProcess, thread: str) -> None:
    code, out, err = await condensate(daemon.home, "threads", "-q")
    assert code == 0, err
    assert thread in out.split()
    assert all(re.fullmatch(r"t-[0-9a-f]{12}", word) for word in out.split())


async def test_bash_completion_completes_commands_options_and_threads(
    daemon: DaemonProcess, thread: str
) -> None:
    """The script `completion bash` prints completes a subcommand, a thread the daemon has,
    and an option, in a real bash."""
    script = (
        "source <(python -m condensate completion bash); "
        'condensate() { python -m condensate "$@"; }; '
        'COMP_WORDS=(condensate ta); COMP_CWORD=1; _condensate; echo "${COMPREPLY[@]}"; '
        'COMP_WORDS=(condensate tail ""); COMP_CWORD=2; _condensate; echo "${COMPREPLY[@]}"; '
        "COMP_WORDS=(condensate tail t --fol); COMP_CWORD=3; _condensate; "
        'echo "${COMPREPLY[@]}"'
    )
    env = _env(daemon.home, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    with anyio.fail_after(60):
        done = await anyio.run_process(["bash", "-c", script], cwd=REPO, env=env, check=False)
    assert done.returncode == 0, done.stderr
    first, threads, option = done.stdout.decode().splitlines()
    assert first == "tail"
    assert thread in threads.split()
    assert option == "--follow"


async def test_run_detach_prints_the_thread(daemon: DaemonProcess, tmp_path: Path) -> None:
    """`run --detach --json` prints the new thread as JSON and returns at once; without
    `--head` it is not a head."""
    brief = f"detached {_marker()}"
    code, out, err = await condensate(
        daemon.home, "run", "--model", MODEL, "--cwd", str(tmp_path), "--detach", "--json", brief
    )
    assert code == 0, err
    created = json.loads(out)
    assert re.fullmatch(r"t-[0-9a-f]{12}", created["id"])
    assert created["model"] == MODEL
    assert created["head"] is False
    assert "usage" in created
    shown = await settle(daemon, created["id"])
    assert shown["events"] >= 5


# -- compact ---------------------------------------------------------------------------------


async def test_compact_shows_the_preview(daemon: DaemonProcess, thread: str) -> None:
    """`compact THREAD` prints the pending ask, any request and what each tier would free,
    and under each tier where the cache is read again, its thinking and what to fetch again."""
    code, out, err = await condensate(daemon.home, "compact", thread)
    assert code == 0, err
    assert "no ask" in out
    assert "nothing requested" in out
    assert re.search(r"usage: [\d,]+ of line [\d,]+", out), out
    assert re.search(r"microcompact would free [\d,]+ tokens \(\d+ receipts\)", out), out
    assert re.search(r"collapse would free [\d,]+ tokens", out), out
    assert re.search(r"summary would keep (from seq \d+|only the brief and pins)", out), out
    # Under each tier: the cache read again, the thinking dropped, what to fetch again.
    assert len(re.findall(r"^  cache: ", out, re.M)) == 3, out
    assert len(re.findall(r"^  thinking dropped: ", out, re.M)) == 3, out
    assert len(re.findall(r"^  to fetch again: ", out, re.M)) == 3, out


async def test_compact_json_prints_the_preview(daemon: DaemonProcess, thread: str) -> None:
    """`compact THREAD --json` prints the daemon's compaction object."""
    code, out, err = await condensate(daemon.home, "compact", thread, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) == {"ask", "requested", "preview", "usage"}
    assert set(data["preview"]) == {"microcompact", "collapse", "summary", "model", "unpriced"}


async def test_compact_decline_with_nothing_pending_fails(
    daemon: DaemonProcess, thread: str
) -> None:
    """`compact THREAD --answer decline` with no pending ask exits 2 and says why."""
    code, out, err = await condensate(daemon.home, "compact", thread, "--answer", "decline")
    assert code == 2
    assert out == ""
    assert err.startswith("condensate: ")
    assert "no pending ask" in err


async def test_compact_microcompact_queues(daemon: DaemonProcess) -> None:
    """`compact THREAD --answer microcompact` with nothing pending queues a compaction."""
    queued = await new_thread(daemon, f"queue a microcompact {_marker()}")
    code, out, err = await condensate(daemon.home, "compact", queued, "--answer", "microcompact")
    assert code == 0, err
    assert out.strip() == "queued"
    client = DaemonClient(daemon.url, daemon.token)
    shown = await anyio.to_thread.run_sync(client.call, "GET", f"/threads/{queued}/compact")
    assert shown["requested"]["mode"] == "microcompact"
    assert shown["requested"]["by"] == "operator"


# -- without a daemon ------------------------------------------------------------------------


async def test_doctor_works_without_a_daemon(tmp_path: Path) -> None:
    """`doctor --json` reads the state directory directly, with no daemon running."""
    code, out, err = await condensate(tmp_path, "doctor", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["home"] == str(tmp_path)
    assert data["db"] == str(tmp_path / "condensate.db")
    assert data["threads"] == 0
    assert data["version"]
    assert (tmp_path / "condensate.db").exists()


async def test_doctor_names_each_cli_engines_version_or_why_it_cannot_run(tmp_path: Path) -> None:
    """`doctor` shows the pinned claude and codex it found, and for a configured CLI that does
    not exist, why that engine cannot run and what to install."""
    code, out, err = await condensate(
        tmp_path, "doctor", "--json", CONDENSATE_CODEX_BINARY=str(tmp_path / "no-codex")
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["claude"].startswith("2.1.332 (")
    assert data["codex"].startswith("unavailable: CONDENSATE_CODEX_BINARY=")
    assert "npm ci" in data["codex"]


async def test_no_daemon_says_to_start_one(tmp_path: Path) -> None:
    """A command with no daemon ever started exits 2 and says to run `condensate serve`."""
    code, out, err = await condensate(tmp_path, "threads")
    assert code == 2
    assert out == ""
    assert err.startswith("condensate: ")
    assert "condensate serve" in err
    assert "CONDENSATE_HOME" in err


async def test_a_stopped_daemon_says_it_cannot_be_reached(tmp_path: Path) -> None:
    """A command whose daemon is not running exits 2 with one plain sentence naming the address
    and `condensate serve` (no urllib wrapper, no errno)."""
    url = f"http://127.0.0.1:{_free_port()}"
    (tmp_path / "token").write_text("a-token\n")
    (tmp_path / "daemon.json").write_text(json.dumps({"url": url, "pid": 1}))
    code, out, err = await condensate(tmp_path, "status")
    assert code == 2
    assert out == ""
    assert err == (
        f"condensate: Cannot reach the daemon at {url}: nothing listens there. Is 'condensate "
        "serve' running?\n"
    )


async def test_doctor_reads_the_postgres_log_the_settings_name(
    tmp_path: Path, postgres_url: str
) -> None:
    """With CONDENSATE_DATABASE_URL, `doctor` counts the threads in PostgreSQL (creating the
    schema on first connect), names the server without its password, and writes no SQLite
    file."""
    code, out, err = await condensate(
        tmp_path, "doctor", "--json", CONDENSATE_DATABASE_URL=postgres_url
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["db"].startswith("postgresql://127.0.0.1:")
    assert data["threads"] == 0
    assert not (tmp_path / "condensate.db").exists()


async def test_run_starts_its_thread_with_the_permissions_given(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path: Path
) -> None:
    """`run --permissions read-only` creates the thread with those permissions, as its log
    records them."""
    fake.queue(Text("looked only"))
    code, out, err = await condensate(
        daemon.home,
        "run",
        "--model",
        MODEL,
        "--cwd",
        str(tmp_path),
        "--permissions",
        "read-only",
        "--detach",
        "look around",
    )
    assert code == 0, err
    thread = out.strip()
    async with aiohttp.ClientSession() as session:
        status, page = await call(session, daemon, "GET", f"/threads/{thread}/tail?after=0")
    assert status == 200, page
    (created,) = [e for e in page["events"] if e["kind"] == "thread.created"]
    assert created["permissions"] == "read-only"
