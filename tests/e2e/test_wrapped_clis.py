"""``condensate claude``: the person's own CLI through the daemon's gateway. Its arguments pass
through untouched, its login is its own (the provider sees the person's key, never the
daemon's or a pass), its exit code is returned, and its session is a thread whose log is the
conversation the CLI sent."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from condensate.client import DaemonClient
from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.e2e.conftest import CLAUDE
from tests.integration.daemon import REPO, running_daemon, wait_for

PERSON_KEY = "sk-person"


def daemon_home(tmp_path: Path) -> Path:
    """The daemon's state directory, made."""
    home = tmp_path / "daemon"
    home.mkdir()
    return home


def wrapper_env(home: Path, daemon_home: Path, *, codex_login: bool = False) -> dict[str, str]:
    """A person's shell: their own key and home (made; with ``codex_login``, their Codex
    login in it, an API key), the daemon found by its state directory."""
    home.mkdir(exist_ok=True)
    if codex_login:
        login = home / ".codex" / "auth.json"
        login.parent.mkdir()
        login.write_text(json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": PERSON_KEY}))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONDENSATE_", "ANTHROPIC_", "OPENAI_", "CODEX_"))
    }
    env.update(
        {
            "HOME": str(home),
            "CONDENSATE_HOME": str(daemon_home),
            "ANTHROPIC_API_KEY": PERSON_KEY,
            "OPENAI_API_KEY": PERSON_KEY,
            "PATH": f"{CLAUDE.parent}:{env.get('PATH', '')}",
        }
    )
    return env


async def wrapped(
    env: dict[str, str], cwd: Path, *args: str, cli: str = "claude"
) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "condensate", cli, *args]
    with anyio.fail_after(120):
        return await anyio.run_process(command, env=env, cwd=cwd, check=False)


async def test_claude_runs_through_the_gateway_with_the_persons_own_key(
    tmp_path: Path, workdir: Path
) -> None:
    """``condensate claude -p ...``: every model request reaches the provider with the
    person's key; none carries the daemon's (it holds another) or a pass; the CLI's output and exit
    code are its own; the session is a thread whose log holds the call, its result and the
    provider's counts, and whose turn ended when the CLI exited."""
    async with FakeModelServer(window=200_000, api_key=PERSON_KEY) as fake:
        fake.queue(
            ToolCalls([Call("Bash", {"command": "seq 1 30"})]),
            Text("thirty numbers"),
            model="claude-opus-5-5",
        )
        home = daemon_home(tmp_path)
        with running_daemon(home, fake.url, CONDENSATE_ANTHROPIC_API_KEY="sk-daemon") as daemon:
            env = wrapper_env(tmp_path / "person", home)
            done = await wrapped(
                env, workdir, "-p", "count to thirty", "--allowedTools", "Bash(seq:*)"
            )
            client = DaemonClient(daemon.url, daemon.token)
            threads = client.call("GET", "/threads")["threads"]
            assert len(threads) == 1, threads
            thread = threads[0]["id"]
            page = client.call("GET", f"/threads/{thread}/tail?limit=500")
    assert done.returncode == 0, done.stderr.decode()
    assert b"thirty numbers" in done.stdout
    assert f"runs as thread {thread}".encode() in done.stderr
    calls = [r for r in fake.requests if r.endpoint == "messages"]
    assert calls, "no model request reached the provider"
    # The daemon's own call (it looks up the model's window) is its own, with its key.
    cli = [r for r in fake.requests if "aiohttp" not in r.headers.get("user-agent", "")]
    assert len(cli) > len(calls) - 1
    for request in cli:
        headers = {k.lower(): v for k, v in request.headers.items()}
        assert "sk-daemon" not in str(headers), request.path
        assert "cgw1." not in str(headers), request.path
    for request in calls:
        assert {k.lower(): v for k, v in request.headers.items()}["x-api-key"] == PERSON_KEY
    kinds = [e["kind"] for e in page["events"]]
    assert kinds[0] == "thread.created"
    assert page["events"][0]["attached"] == "managed"
    results = [e for e in page["events"] if e["kind"] == "tool.result"]
    assert [r["argument"] for r in results] == ["seq 1 30"]
    assert "30" in results[0]["output"]
    assert kinds.count("model.usage") == len([c for c in calls if c.model == "claude-opus-5-5"])
    assert kinds[-1] == "turn.ended"
    assert page["events"][-1]["outcome"] == "completed"


async def test_codex_runs_through_the_gateway_with_the_persons_own_key(
    tmp_path: Path, workdir: Path
) -> None:
    """``condensate codex exec ...``: Codex's requests reach the provider with the person's
    key (none with the daemon's or a pass), its own compaction is out of reach (a catalog of
    huge windows), and the session's log holds the command's result."""
    async with FakeModelServer(window=200_000, api_key=PERSON_KEY) as fake:
        fake.queue(
            ToolCalls([Call("exec_command", {"cmd": "seq 1 30"})]),
            Text("thirty numbers"),
            model="gpt-6.2-sol",
        )
        home = daemon_home(tmp_path)
        with running_daemon(home, fake.url, CONDENSATE_OPENAI_API_KEY="sk-daemon") as daemon:
            env = wrapper_env(tmp_path / "person", home, codex_login=True)
            done = await wrapped(
                env, workdir, "exec", "--skip-git-repo-check", "count to thirty", cli="codex"
            )
            client = DaemonClient(daemon.url, daemon.token)
            thread = client.call("GET", "/threads")["threads"][0]["id"]
            page = client.call("GET", f"/threads/{thread}/tail?limit=500")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"thirty numbers" in done.stdout
    calls = [r for r in fake.requests if r.endpoint == "responses"]
    assert calls
    for request in calls:
        headers = {k.lower(): v for k, v in request.headers.items()}
        assert headers["authorization"] == f"Bearer {PERSON_KEY}"
    catalog = json.loads((home / "codex" / "attached-models.json").read_text())
    assert all(m["context_window"] >= 100_000_000 for m in catalog["models"])
    results = [e for e in page["events"] if e["kind"] == "tool.result"]
    assert len(results) == 1
    assert "30" in results[0]["output"]


@pytest.mark.parametrize(
    ("cli", "model", "endpoint", "args"),
    [
        ("claude", "claude-opus-5-5", "messages", ("-p", "say hi")),
        ("codex", "gpt-6.2-sol", "responses", ("exec", "--skip-git-repo-check", "say hi")),
    ],
)
async def test_a_person_without_a_login_runs_on_the_daemons_key(
    tmp_path: Path, workdir: Path, cli: str, model: str, endpoint: str, args: tuple[str, ...]
) -> None:
    """A person with no login of their own: the CLI is given the session's pass alone, and
    its model requests reach the provider with the daemon's key."""
    async with FakeModelServer(window=200_000, api_key="sk-daemon") as fake:
        fake.queue(Text("hi there"), model=model)
        home = daemon_home(tmp_path)
        daemon_keys = {
            "CONDENSATE_ANTHROPIC_API_KEY": "sk-daemon",
            "CONDENSATE_OPENAI_API_KEY": "sk-daemon",
        }
        with running_daemon(home, fake.url, **daemon_keys):
            env = wrapper_env(tmp_path / "person", home)
            del env["ANTHROPIC_API_KEY"], env["OPENAI_API_KEY"]
            done = await wrapped(env, workdir, *args, cli=cli)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"hi there" in done.stdout
    calls = [r for r in fake.requests if r.endpoint == endpoint]
    assert calls
    assert all(r.status == 200 for r in calls)


async def test_the_clis_exit_code_is_the_wrappers(tmp_path: Path, workdir: Path) -> None:
    """A CLI that fails (an unknown option) exits through the wrapper with its own code and
    message, and its session's turn ends failed with that code."""
    async with FakeModelServer(window=200_000) as fake:
        home = daemon_home(tmp_path)
        with running_daemon(home, fake.url) as daemon:
            env = wrapper_env(tmp_path / "person", home)
            done = await wrapped(env, workdir, "--no-such-option-here")
            client = DaemonClient(daemon.url, daemon.token)
            thread = client.call("GET", "/threads")["threads"][0]
            page = client.call("GET", f"/threads/{thread['id']}/tail")
    assert done.returncode not in (0, None)
    assert b"no-such-option-here" in done.stderr
    ended = page["events"][-1]
    assert ended["kind"] == "turn.ended"
    assert ended["outcome"] == "failed"
    assert f"code {done.returncode}" in ended["reason"]


def test_the_wrapper_is_listed_for_each_engine_that_has_one() -> None:
    """``condensate --help`` lists ``claude`` (the engine declares how its CLI is launched)."""
    done = subprocess.run(
        [sys.executable, "-m", "condensate", "--help"], capture_output=True, cwd=REPO, check=False
    )
    assert b"run your own claude in this terminal" in done.stdout
    assert b"run your own codex in this terminal" in done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_a_restarted_daemon_takes_the_session_up_again(tmp_path: Path, workdir: Path) -> None:
    """The daemon killed mid-session (SIGKILL) and started again on its port: the CLI's next
    request with the same base URL is managed again (forwarded, counted), what was logged is
    not logged twice, and the session's turn is resumed, not ended."""
    async with FakeModelServer(window=200_000) as fake:
        fake.queue(Text("one"), Text("two"), model="claude-opus-5-5")
        home = daemon_home(tmp_path)
        port = str(free_port())
        with running_daemon(home, fake.url, CONDENSATE_PORT=port) as daemon:
            client = DaemonClient(daemon.url, daemon.token)
            body = {"engine": "claude", "cwd": str(workdir), "pid": os.getpid()}
            attached = client.call("POST", "/attach", body)
            base, thread = attached["launch"]["env"]["ANTHROPIC_BASE_URL"], attached["thread"]["id"]
            first = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
            assert await post_messages(base, first) == 200
            async with aiohttp.ClientSession() as session:  # a count is logged after its reply
                await wait_for(session, daemon, thread, lambda e: e["kind"] == "model.usage", 10)
            assert daemon.process is not None
            daemon.process.kill()
            daemon.process.wait(timeout=10)
            daemon.start()
            reply = {"role": "assistant", "content": [{"type": "text", "text": "one"}]}
            again = [*first, reply, {"role": "user", "content": [{"type": "text", "text": "more"}]}]
            assert await post_messages(base, again) == 200
            client = DaemonClient(daemon.url, daemon.token)
            shown = client.call("GET", f"/threads/{thread}")
            page = client.call("GET", f"/threads/{thread}/tail?limit=500&history=1")
    texts = [e["text"] for e in page["events"] if e["kind"] == "message.user"]
    assert texts == ["hello", "more"]
    assert [e["cause"] for e in page["events"] if e["kind"] == "turn.started"] == [
        "human",
        "resume",
    ]
    assert shown["status"] == "running"
    assert len([e for e in page["events"] if e["kind"] == "model.usage"]) == 2


async def post_messages(base: str, messages: list[dict[str, Any]]) -> int:
    """One Messages request as a person's Claude Code sends it (its own key): the status."""
    body = {"model": "claude-opus-5-5", "max_tokens": 64, "messages": messages}
    headers = {"x-api-key": PERSON_KEY, "anthropic-version": "2023-06-01"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{base}/v1/messages", json=body, headers=headers) as answer,
    ):
        await answer.read()
        return answer.status


async def test_a_subagent_of_the_persons_claude_is_its_own(tmp_path: Path, workdir: Path) -> None:
    """The person's Claude Code starts a subagent (its Task tool): the subagent's requests are
    forwarded as sent and billed to the session as side calls, and nothing of the subagent's
    own conversation is logged as the session's."""
    async with FakeModelServer(window=200_000, api_key=PERSON_KEY) as fake:
        task = {
            "description": "count",
            "prompt": "Count to three, please.",
            "subagent_type": "general-purpose",
        }
        fake.queue(
            # The main session and its subagent each take the next reply, in whatever order
            # Claude Code sends them.
            ToolCalls([Call("Task", task)]),
            Text("one two three"),
            Text("the subagent counted"),
            Text("done"),
            model="claude-opus-5-5",
        )
        home = daemon_home(tmp_path)
        with running_daemon(home, fake.url) as daemon:
            env = wrapper_env(tmp_path / "person", home)
            done = await wrapped(env, workdir, "-p", "delegate the counting")
            client = DaemonClient(daemon.url, daemon.token)
            thread = client.call("GET", "/threads")["threads"][0]["id"]
            page = client.call("GET", f"/threads/{thread}/tail?limit=500")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    side = [
        r
        for r in fake.requests
        if r.endpoint == "messages" and "x-claude-code-agent-id" in {k.lower() for k in r.headers}
    ]
    assert side, "no subagent request reached the provider"
    usages = [e for e in page["events"] if e["kind"] == "model.usage"]
    assert any(u["side"] for u in usages)
    texts = [e["text"] for e in page["events"] if e["kind"] == "message.user"]
    assert not any("Count to three" in t for t in texts)


async def test_a_daemon_that_dies_mid_session_leaves_the_cli_a_clear_error(
    tmp_path: Path, workdir: Path
) -> None:
    """The daemon killed while the person's Claude Code runs a tool: the CLI's next request
    is answered at once, in the provider's shape and not to be retried, with a sentence
    saying the daemon is down and how to start it; the CLI ends its turn with it (no hang)."""
    async with FakeModelServer(window=200_000, api_key=PERSON_KEY) as fake:
        fake.queue(
            ToolCalls([Call("Bash", {"command": "sleep 3"})]),
            Text("never seen"),
            model="claude-opus-5-5",
        )
        home = daemon_home(tmp_path)
        with running_daemon(home, fake.url) as daemon:
            env = wrapper_env(tmp_path / "person", home)
            command = [sys.executable, "-m", "condensate", "claude", "-p", "wait a little"]
            command += ["--allowedTools", "Bash(sleep:*)"]
            async with await anyio.open_process(command, env=env, cwd=workdir) as cli:
                with anyio.fail_after(30):
                    while not [r for r in fake.requests if r.endpoint == "messages"]:  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                assert daemon.process is not None
                daemon.process.kill()
                daemon.process.wait(timeout=10)
                with anyio.fail_after(60):
                    code = await cli.wait()
                assert cli.stdout is not None
                out = (await cli.stdout.receive()).decode()
    assert code != 0
    assert "daemon" in out
    assert "is not running" in out
    assert len([r for r in fake.requests if r.endpoint == "messages"]) == 1


async def test_a_persons_codex_is_told_of_a_window_in_its_conversation(
    tmp_path: Path, workdir: Path
) -> None:
    """The person's Codex reads long outputs past its line (the operator's cap on its
    ceiling): a window is taken in flight, Codex shows the line for the person among its
    messages, finishes its turn, and no request it sent afterwards carried that line."""
    async with FakeModelServer(window=1_000_000, api_key=PERSON_KEY) as fake:
        reads = [ToolCalls([Call("exec_command", {"cmd": f"seq {n} 4000"})]) for n in range(8)]
        fake.queue(*reads, Text("all read"), model="gpt-6.2-sol")
        home = daemon_home(tmp_path)
        settings = {
            "CONDENSATE_WINDOW_CEILING_PI": "70000",
            "CONDENSATE_CURATOR_MODEL": "openai:gpt-5.5",
        }
        with running_daemon(home, fake.url, **settings):
            env = wrapper_env(tmp_path / "person", home, codex_login=True)
            done = await wrapped(
                env, workdir, "exec", "--skip-git-repo-check", "read them all", cli="codex"
            )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"all read" in done.stdout
    assert b"[condensate window]" in done.stdout + done.stderr
    calls = [r for r in fake.requests if r.endpoint == "responses" and r.model == "gpt-6.2-sol"]
    assert not any("[condensate window]" in str(r.body) for r in calls)
