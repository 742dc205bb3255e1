"""What a native thread may touch: its ``permissions`` enforced by the tools on real files and
symlinks under tmp_path, its ``tools`` and unreadable arguments enforced by the loop in a real
runtime against the fake model server, and the shell's environment kept free of secrets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters._secrets import PROVIDER_KEYS, is_secret, scrubbed
from adapters.native.engine import NativeEngine, tool_specs
from adapters.native.tools import NATIVE_PERMISSIONS, run_tool
from adapters.tool_contract import ToolContext
from condensate.engine import ThreadSpec
from condensate.errors import Refused
from condensate.events import ChildSpawned, Event, SystemLine, ToolResult, TurnEnded
from condensate.runtime import Runtime
from condensate.testing.fake_model import Call, Cut, FakeModelServer, Text, ToolCalls
from tests.integration.daemon import call, running_daemon
from tests.integration.harness import ClientWrap, runtime_on

MODEL = "anthropic:claude-sonnet-4-5"

# --- the tools under each permissions value --------------------------------------------------


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """cwd with a file, a symlink to a file outside, a symlinked directory outside and a state
    directory; next to it, an outside directory holding a secret."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET outside\n")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "inside.txt").write_text("inside\n")
    (work / "link.txt").symlink_to(outside / "secret.txt")
    (work / "linkdir").symlink_to(outside)
    (work / "state").mkdir()
    (work / "state" / "token").write_text("TOKEN\n")
    return work


def _ctx(cwd: Path, permissions: str) -> ToolContext:
    return ToolContext(cwd=cwd, permissions=permissions, off_limits=(cwd / "state",))


OUTSIDE = "../outside/secret.txt"
CASES: list[tuple[str, str, dict[str, Any], str | None]] = [
    # default: today's behaviour, the tools are no sandbox
    ("default", "read", {"path": OUTSIDE}, None),
    ("default", "read", {"path": "link.txt"}, None),
    ("default", "write", {"path": "linkdir/new.txt", "content": "x"}, None),
    ("default", "shell", {"command": "true"}, None),
    # workspace: the file tools inside cwd, symlinks resolved; no shell
    ("workspace", "read", {"path": "inside.txt"}, None),
    ("workspace", "read", {"path": "{cwd}/inside.txt"}, None),
    ("workspace", "read", {"path": "sub/../inside.txt"}, None),
    ("workspace", "read", {"path": OUTSIDE}, "outside cwd"),
    ("workspace", "read", {"path": "sub/../../outside/secret.txt"}, "outside cwd"),
    ("workspace", "read", {"path": "{outside}/secret.txt"}, "outside cwd"),
    ("workspace", "read", {"path": "/etc/hostname"}, "outside cwd"),
    ("workspace", "read", {"path": "link.txt"}, "resolves to"),
    ("workspace", "read", {"path": "linkdir/secret.txt"}, "outside cwd"),
    ("workspace", "read", {"path": "state/token"}, "state directory"),
    ("workspace", "search", {"pattern": "x", "path": "linkdir"}, "outside cwd"),
    ("workspace", "search", {"pattern": "x", "path": ".."}, "outside cwd"),
    ("workspace", "search", {"pattern": "inside"}, None),
    ("workspace", "edit", {"path": "inside.txt", "old_string": "in", "new_string": "IN"}, None),
    ("workspace", "edit", {"path": "link.txt", "old_string": "S", "new_string": "s"}, "outside"),
    ("workspace", "write", {"path": "sub/new.txt", "content": "x"}, None),
    ("workspace", "write", {"path": "linkdir/new.txt", "content": "x"}, "outside cwd"),
    ("workspace", "write", {"path": "linkdir/deep/new.txt", "content": "x"}, "outside cwd"),
    ("workspace", "write", {"path": "../escape.txt", "content": "x"}, "outside cwd"),
    ("workspace", "write", {"path": "link.txt", "content": "x"}, "outside cwd"),
    ("workspace", "shell", {"command": "true"}, "permissions are 'workspace'"),
    # read-only: read and search inside cwd; nothing that changes anything
    ("read-only", "read", {"path": "inside.txt"}, None),
    ("read-only", "search", {"glob": "*.txt"}, None),
    ("read-only", "read", {"path": OUTSIDE}, "outside cwd"),
    ("read-only", "read", {"path": "link.txt"}, "outside cwd"),
    ("read-only", "write", {"path": "new.txt", "content": "x"}, "permissions are 'read-only'"),
    (
        "read-only",
        "edit",
        {"path": "inside.txt", "old_string": "in", "new_string": "IN"},
        "permissions are 'read-only'",
    ),
    ("read-only", "shell", {"command": "touch ran"}, "permissions are 'read-only'"),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize(("permissions", "tool", "arguments", "refused"), CASES)
async def test_each_permissions_value_allows_or_refuses_each_call(
    cwd: Path, permissions: str, tool: str, arguments: dict[str, Any], refused: str | None
) -> None:
    """A call the permissions allow runs; one they refuse is an error naming why and leaves
    every file, inside cwd and out, as it was."""
    outside = cwd.parent / "outside"
    args = {
        k: v.format(cwd=cwd, outside=outside) if isinstance(v, str) else v
        for k, v in arguments.items()
    }
    before = _snapshot(cwd.parent)
    outcome = await run_tool(tool, args, _ctx(cwd, permissions))
    if refused is None:
        assert not outcome.is_error, outcome.output
        return
    assert outcome.is_error
    assert refused in outcome.output
    assert _snapshot(cwd.parent) == before
    assert not (outside / "new.txt").exists()
    assert not (cwd / "ran").exists()


async def test_a_context_with_an_unknown_permissions_value_runs_nothing(cwd: Path) -> None:
    """A hand-built context whose permissions are unknown refuses even read: it fails closed."""
    outcome = await run_tool("read", {"path": "inside.txt"}, _ctx(cwd, "everything"))
    assert outcome.is_error
    assert "cannot enforce permissions 'everything'" in outcome.output


async def test_a_refused_path_names_the_permissions_and_the_resolved_target(cwd: Path) -> None:
    """The refusal of a symlink says where it leads and which permissions confine the tools."""
    outcome = await run_tool("read", {"path": "link.txt"}, _ctx(cwd, "workspace"))
    real = await anyio.Path(cwd.parent / "outside" / "secret.txt").resolve()
    root = await anyio.Path(cwd).resolve()
    assert outcome.output == (
        f"read: link.txt resolves to {real}, outside cwd ({root}); "
        "permissions 'workspace' confine the file tools to cwd, the daemon's state "
        "directory excepted."
    )


@pytest.mark.parametrize("permissions", ["workspace", "read-only"])
async def test_a_confined_search_skips_symlinks_that_lead_outside(
    cwd: Path, permissions: str
) -> None:
    """Searching cwd under a confined value never reads through a symlink to outside, nor the
    state directory; under default it does."""
    confined = await run_tool("search", {"pattern": "SECRET|TOKEN"}, _ctx(cwd, permissions))
    free = await run_tool("search", {"pattern": "SECRET|TOKEN"}, _ctx(cwd, "default"))
    assert not confined.is_error
    assert confined.output.startswith("No lines match")
    assert "link.txt:1:SECRET outside" in free.output


async def test_a_confined_search_lists_paths_relative_to_cwd(cwd: Path) -> None:
    """A confined search shows paths under cwd relative to it, as default does."""
    outcome = await run_tool("search", {"glob": "*.txt"}, _ctx(cwd, "workspace"))
    assert outcome.output.splitlines() == ["inside.txt"]


async def test_a_cwd_reached_through_a_symlink_is_still_the_workspace(tmp_path: Path) -> None:
    """When cwd itself is a symlink, paths inside its target are inside the workspace, and
    search still shows them relative to cwd."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("alpha\n")
    (tmp_path / "alias").symlink_to(real)
    ctx = ToolContext(cwd=tmp_path / "alias", permissions="workspace")
    read_back = await run_tool("read", {"path": "a.txt"}, ctx)
    found = await run_tool("search", {"pattern": "alpha"}, ctx)
    assert read_back.output == "     1\talpha"
    assert found.output.splitlines()[0] == "a.txt:1:alpha"


def test_read_only_and_workspace_threads_are_not_offered_what_they_may_not_run() -> None:
    """tool_specs leaves out the tools the permissions forbid, and the names the spec omits."""

    def offered(permissions: str, tools: tuple[str, ...] = ()) -> set[str]:
        spec = ThreadSpec(
            engine="api", model=MODEL, cwd="/", brief="b", permissions=permissions, tools=tools
        )
        return {t.name for t in tool_specs(spec)}

    control = {"spawn", "join", "compact_context", "compact_microcompact", "context_usage"}
    control |= {"recall", "read_tool_output", "pin"}
    assert offered("default") == {"read", "search", "edit", "write", "shell", *control}
    assert offered("workspace") == {"read", "search", "edit", "write", *control}
    assert offered("read-only") == {"read", "search", *control}
    assert offered("ask") == offered("default")
    assert offered("read-only", ("read", "shell")) == {"read"}


def test_an_unknown_permissions_value_is_refused_naming_the_set() -> None:
    """NativeEngine refuses a permissions value outside NATIVE_PERMISSIONS with a 422."""
    spec = ThreadSpec(engine="api", model=MODEL, cwd="/", brief="b", permissions="root")
    with pytest.raises(Refused) as refused:
        NativeEngine(spec)
    assert refused.value.code == "unsupported-permissions"
    assert str(refused.value) == (
        "The native engine cannot enforce permissions 'root'; it enforces "
        "'default', 'workspace', 'read-only', 'ask'."
    )
    assert NATIVE_PERMISSIONS == ("default", "workspace", "read-only", "ask")


# --- the loop, in a real runtime against the fake model --------------------------------------


def running(
    tmp_path: Path, fake: FakeModelServer, wrap: ClientWrap | None = None
) -> AbstractAsyncContextManager[Runtime]:
    """A runtime on a real log and the fake; ``wrap`` may rewrite what the client returns."""
    return runtime_on(tmp_path / "home", fake, wrap=wrap)


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


async def _turn(runtime: Runtime, work: Path, model: str = MODEL, **spec: Any) -> list[Event]:
    """Every event the thread's first turn logged."""
    thread = await runtime.create(
        ThreadSpec(engine="api", model=model, cwd=str(work), brief="go", **spec)
    )
    with anyio.fail_after(30):
        await thread.turn_done.wait()
    return [stored.event for stored in (await runtime.log.events(thread.thread_id))]


def _results(events: list[Event]) -> list[ToolResult]:
    return [e for e in events if isinstance(e, ToolResult)]


def _outcome(events: list[Event]) -> str:
    return [e for e in events if isinstance(e, TurnEnded)][-1].outcome


async def test_a_read_only_thread_gets_an_error_result_and_the_file_stays(tmp_path, fake):
    """A scripted write in a read-only thread is answered with an error result naming the
    permissions, the file is not created, and the turn goes on to the model's next reply."""
    work = tmp_path / "work"
    work.mkdir()
    fake.queue(ToolCalls([Call("write", {"path": "a.txt", "content": "x"})]), Text("sorry"))
    async with running(tmp_path, fake) as runtime:
        events = await _turn(runtime, work, permissions="read-only")
    (result,) = _results(events)
    assert result.is_error
    assert "permissions are 'read-only'" in result.output
    assert not (work / "a.txt").exists()
    assert _outcome(events) == "completed"
    assert len(fake.requests) == 2


async def test_a_workspace_thread_cannot_write_through_a_symlink(tmp_path, fake):
    """A workspace thread's write into a symlinked directory leading outside cwd is refused
    and nothing appears outside."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "out").symlink_to(outside)
    fake.queue(ToolCalls([Call("write", {"path": "out/x.txt", "content": "x"})]), Text("ok"))
    async with running(tmp_path, fake) as runtime:
        events = await _turn(runtime, work, permissions="workspace")
    (result,) = _results(events)
    assert result.is_error
    assert "outside cwd" in result.output
    assert list(outside.iterdir()) == []


async def test_an_unknown_permissions_value_is_refused_before_anything_is_logged(tmp_path, fake):
    """Runtime.create with an unknown permissions value raises the 422 and logs no thread."""
    async with running(tmp_path, fake) as runtime:
        with pytest.raises(Refused) as refused:
            await runtime.create(
                ThreadSpec(engine="api", model=MODEL, cwd=str(tmp_path), brief="b", permissions="x")
            )
        assert runtime.threads == {}
    assert refused.value.code == "unsupported-permissions"
    assert fake.requests == []


async def test_the_api_answers_an_unknown_permissions_value_with_422(tmp_path, fake, session):
    """POST /threads with permissions the native engine does not know is a 422 naming the
    value and the documented set, and no thread is listed."""
    home = tmp_path / "daemon"
    home.mkdir()
    with running_daemon(home, fake.url) as daemon:
        body = {"engine": "api", "model": MODEL, "cwd": str(tmp_path), "brief": "b"}
        status, refused = await call(
            session, daemon, "POST", "/threads", {**body, "permissions": "sudo"}
        )
        _, listed = await call(session, daemon, "GET", "/threads")
    assert (status, refused["error"]) == (422, "unsupported-permissions")
    assert "'sudo'" in refused["detail"]
    assert "'default', 'workspace', 'read-only'" in refused["detail"]
    assert listed["threads"] == []


async def test_a_call_to_a_tool_outside_the_threads_tools_is_not_run(tmp_path, fake):
    """A thread limited to read that calls shell gets an error result naming its tools, and
    the command never runs."""
    work = tmp_path / "work"
    work.mkdir()
    fake.queue(ToolCalls([Call("shell", {"command": "touch ran"})]), Text("ok"))
    async with running(tmp_path, fake) as runtime:
        events = await _turn(runtime, work, tools=("read",))
    (result,) = _results(events)
    assert result.is_error
    assert result.output == (
        "'shell' is not one of this thread's tools, so it was not run; its tools are: read."
    )
    assert not (work / "ran").exists()
    assert _outcome(events) == "completed"


async def test_a_control_tool_outside_the_threads_tools_is_not_run(tmp_path, fake):
    """A thread limited to read that calls spawn starts no child."""
    fake.queue(ToolCalls([Call("spawn", {"brief": "child"})]), Text("ok"))
    async with running(tmp_path, fake) as runtime:
        events = await _turn(runtime, tmp_path, tools=("read",))
    (result,) = _results(events)
    assert result.is_error
    assert "'spawn' is not one of this thread's tools" in result.output
    assert not any(isinstance(e, ChildSpawned) for e in events)
    assert len(runtime.threads) == 1


NOT_JSON = ToolCalls([Call("write", raw="{'path': 'a.txt', 'content': 'x'}")])
CUT = Cut(ToolCalls([Call("write", {"path": "a.txt", "content": "x" * 200})]))


@pytest.mark.parametrize(
    ("model", "reply", "why"),
    [
        (MODEL, NOT_JSON, "The arguments of write"),
        (MODEL, CUT, "max_tokens"),
        ("chat:qwen3-coder", NOT_JSON, "The arguments of write"),
        ("chat:qwen3-coder", CUT, "cut off"),
    ],
    ids=["anthropic-not-json", "anthropic-cut-off", "chat-not-json", "chat-cut-off"],
)
async def test_a_call_with_unreadable_arguments_is_answered_not_run(
    tmp_path, fake, model, reply, why
):
    """A call whose arguments the provider could not read (not JSON, cut off at max_tokens)
    gets an error result with the reason and what to do, the tool does not run, and the model
    is called again in the same turn."""
    work = tmp_path / "work"
    work.mkdir()
    fake.queue(reply, Text("retrying"))
    async with running(tmp_path, fake) as runtime:
        events = await _turn(runtime, work, model=model)
    (result,) = _results(events)
    assert result.is_error
    assert why in result.output
    assert result.output.endswith(
        "The call was not run; call the tool again with a JSON object of its arguments."
    )
    assert not (work / "a.txt").exists()
    assert _outcome(events) == "completed"
    assert [r.reply for r in fake.requests][-1] == "text"


# --- the shell's environment -----------------------------------------------------------------


SECRET_TABLE = [
    ("CONDENSATE_ANTHROPIC_API_KEY", True),
    ("condensate_lower", True),
    ("CONDENSATE_HOME", True),
    ("ANTHROPIC_AUTH_TOKEN", True),
    ("CODEX_PROVIDER_API_KEY", True),
    ("GITHUB_TOKEN", True),
    ("AWS_SECRET_ACCESS_KEY", True),
    ("DB_PASSWORD", True),
    ("PGPASSWORD", True),
    ("NPM_AUTHTOKEN", True),
    ("SENTRY_DSN", True),
    ("SLACK_WEBHOOK_URL", True),
    ("DOCKER_AUTH_CONFIG", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", True),
    ("MYSQL_PWD", True),
    ("REDIS_PASS", True),
    ("PWD", False),
    ("OLDPWD", False),
    ("HTTPS_PROXY", False),
    ("PATH", False),
    ("HOME", False),
    ("LANG", False),
    ("LC_ALL", False),
    ("SSH_AUTH_SOCK", False),
    ("TOKENIZERS_PARALLELISM", False),
    ("KEYMAP", False),
]


@pytest.mark.parametrize(("name", "secret"), SECRET_TABLE)
def test_the_secret_rule_takes_credentials_and_leaves_the_working_environment(
    name: str, secret: bool
) -> None:
    """is_secret takes settings, provider keys and credential-like names, by whole word."""
    assert is_secret(name) is secret


def test_every_provider_key_is_a_secret() -> None:
    """The provider keys the daemon reads are all removed from the shell's environment."""
    assert scrubbed(dict.fromkeys(PROVIDER_KEYS, "k")) == {}


async def test_env_in_the_shell_shows_no_secret(tmp_path: Path, monkeypatch) -> None:
    """``env`` run by the shell tool prints none of the daemon's keys, settings or tokens,
    and still has PATH and HOME."""
    planted = [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "CODEX_PROVIDER_API_KEY",
        "CONDENSATE_OPENAI_API_KEY",
        "CONDENSATE_HOME",
        "HF_TOKEN",
    ]
    for name in planted:
        monkeypatch.setenv(name, f"planted-{name.lower()}")
    outcome = await run_tool("shell", {"command": "env"}, ToolContext(cwd=tmp_path))
    assert not outcome.is_error
    for name in planted:
        assert name not in outcome.output
        assert f"planted-{name.lower()}" not in outcome.output
    names = {line.split("=", 1)[0] for line in outcome.output.splitlines()}
    assert {"PATH", "HOME"} <= names


async def test_a_key_the_login_profile_exports_is_unset_too(tmp_path: Path, monkeypatch) -> None:
    """The shell is a login shell: what its profile exports passes the same rule, so a key
    exported there is gone and every other name survives, exactly as is_secret decides."""
    home = tmp_path / "home"
    home.mkdir()
    names = {name for name, _ in SECRET_TABLE} - {"PATH", "HOME"}  # env must still run
    exports = "".join(f"export {name}=from-profile\n" for name in sorted(names))
    (home / ".bash_profile").write_text(exports)
    monkeypatch.setenv("HOME", str(home))
    outcome = await run_tool("shell", {"command": "env"}, ToolContext(cwd=tmp_path))
    seen = {
        line.split("=", 1)[0] for line in outcome.output.splitlines() if "=from-profile" in line
    }
    assert seen == {name for name in names if not is_secret(name)}


async def test_bash_line_numbers_are_the_commands_own(tmp_path: Path) -> None:
    """The rule run before the command does not shift the line numbers bash reports."""
    outcome = await run_tool(
        "shell", {"command": "true\nno-such-command-x"}, ToolContext(cwd=tmp_path)
    )
    assert "line 2: no-such-command-x: command not found" in outcome.output


def test_condense_is_an_agent_reset_threads_tool_only() -> None:
    """A thread Condensate windows is never offered condense, even when its spec names it;
    an agent-reset thread always is, in place of the compaction tools."""
    from condensate.events import ResetPolicy

    named = ("read", "condense", "compact_context")
    planned = ThreadSpec(engine="api", model=MODEL, cwd="/", brief="b", tools=named)
    reset = ThreadSpec(
        engine="api", model=MODEL, cwd="/", brief="b", tools=named, reset=ResetPolicy()
    )
    assert {t.name for t in tool_specs(planned)} == {"read", "compact_context"}
    assert {t.name for t in tool_specs(reset)} == {"read", "condense"}


async def test_a_url_with_a_password_the_profile_exports_is_unset_too(
    tmp_path: Path, monkeypatch
) -> None:
    """A login profile's DATABASE_URL carrying a password is gone from the command's
    environment; one without a password, and a proxy, stay."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text(
        "export DATABASE_URL=postgresql://me:pass@db/app\n"
        "export CACHE_URL=redis://cache:6379/0\n"
        "export HTTPS_PROXY=http://proxy:3128\n"
    )
    monkeypatch.setenv("HOME", str(home))
    outcome = await run_tool("shell", {"command": "env"}, ToolContext(cwd=tmp_path))
    assert "pass@db" not in outcome.output
    assert "CACHE_URL=redis://cache:6379/0" in outcome.output
    assert "HTTPS_PROXY=http://proxy:3128" in outcome.output


async def test_replies_that_keep_calling_unrunnable_tools_stop_the_turn(tmp_path, fake):
    """A model whose replies keep sending calls that cannot run (arguments that are no JSON
    object, a tool the thread lacks) is called three times, not hundreds: the turn stops with
    a system line saying why."""
    work = tmp_path / "work"
    work.mkdir()
    nowhere = ToolCalls([Call("teleport", {"to": "mars"})])
    fake.queue(NOT_JSON, nowhere, NOT_JSON, NOT_JSON, NOT_JSON, Text("never asked"))
    async with running(tmp_path, fake) as runtime:
        events = await _turn(runtime, work)
    assert len(fake.requests) == 3
    assert all(result.is_error for result in _results(events))
    assert [e.code for e in events if isinstance(e, SystemLine)] == ["tool-calls-unrunnable"]
    assert _outcome(events) == "stopped"
    assert not (work / "a.txt").exists()


async def test_a_runnable_call_between_unrunnable_ones_starts_the_count_again(tmp_path, fake):
    """Only replies in a row count: a call that runs in between lets the turn go on."""
    work = tmp_path / "work"
    work.mkdir()
    runs = ToolCalls([Call("write", {"path": "a.txt", "content": "x"})])
    fake.queue(NOT_JSON, NOT_JSON, runs, NOT_JSON, NOT_JSON, Text("done"))
    async with running(tmp_path, fake) as runtime:
        events = await _turn(runtime, work)
    assert _outcome(events) == "completed"
    assert len(fake.requests) == 6
    assert (work / "a.txt").read_text() == "x"
