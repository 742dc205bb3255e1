"""The ``claude`` CLI as a child process: which binary (the pinned version, or refused), its
command line and environment, starting and stopping it, and the stream-json lines written to
its stdin. It knows nothing of turns or of the log; the engine decides what to start and send.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from adapters import _child, _pinned
from adapters.claude_code import _permissions
from condensate.core.context_tools import offered
from condensate.engine import (
    EngineEnv,
    EngineSettings,
    Launch,
    ThreadSpec,
    Verdict,
    mcp,
    own_settings,
)
from condensate.providers import parse_model

STATE_DIR = "claude"
"""Each thread's CLI state is ``$CONDENSATE_HOME/claude/<thread>`` (removed at daemon start)."""
PINNED_VERSION = "2.1.332"
"""The version ``package.json`` pins; a CLI of another major.minor is refused."""
CLI = _pinned.PinnedCli(
    command="claude",
    label="Claude Code",
    package="@anthropic-ai/claude-code",
    pinned=PINNED_VERSION,
    setting="CONDENSATE_CLAUDE_BINARY",
)

resolve_binary = CLI.resolve
check_version = CLI.check_version


class ClaudeSettings(EngineSettings):
    claude_binary: str | None = None
    """``CONDENSATE_CLAUDE_BINARY``: the ``claude`` CLI (default: a checkout's pinned
    ``node_modules/.bin/claude``, else PATH, else where npm installs a CLI: ``_pinned``)."""
    window_ceiling_claude: int | None = Field(default=None, gt=0)
    """``CONDENSATE_WINDOW_CEILING_CLAUDE``: the operator's cap on Claude Code's ceiling."""

    def ceiling_cap(self) -> int | None:
        return self.window_ceiling_claude


def settings_of(env: EngineEnv) -> ClaudeSettings:
    """The engine's settings: those the daemon gave, else the environment's."""
    return own_settings(ClaudeSettings, env.settings)


def doctor(settings: EngineSettings) -> str:
    """The binary the settings name and its version; raises ``ConfigError`` saying why not."""
    own = own_settings(ClaudeSettings, settings)
    binary = resolve_binary(own.claude_binary)
    return f"{check_version(binary)} ({binary})"


spawn = _child.spawn
stop = _child.stop
stderr_tail = _child.stderr_tail


def command(
    binary: str,
    spec: ThreadSpec,
    *,
    resume: str | None,
    fork_at: str | None,
    new_session: str | None,
    mcp_config: Path | None = None,
) -> list[str]:
    """The command line of a thread's CLI. ``resume`` continues that session, or with
    ``fork_at`` forks it at that line; ``new_session`` is the id the new session takes;
    ``mcp_config`` is the thread's Condensate tools (its MCP server, and no other)."""
    args = [
        binary,
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        parse_model(spec.model).name,
        *_permissions.flags(spec, context_tools=mcp_config is not None),
    ]
    if mcp_config is not None:
        args += ["--mcp-config", str(mcp_config), "--strict-mcp-config"]
    if spec.persona:
        args += ["--append-system-prompt", spec.persona]
    if resume is not None:
        args += ["--resume", resume]
        if fork_at is not None:
            args += ["--fork-session", f"--resume-session-at={fork_at}"]
    if new_session is not None:
        args += ["--session-id", new_session]
    return args


def write_mcp_config(config_dir: Path, spec: ThreadSpec, env: EngineEnv) -> Path:
    """The ``--mcp-config`` file: Condensate's tools for the thread, mode 0600 (it holds the
    API token)."""
    tools = offered(head=spec.head, reset=spec.reset is not None)
    document = mcp.config(sys.executable, env.daemon_url, env.thread_token, env.thread_id, tools)
    return _child.write_private(config_dir / "condensate-mcp.json", json.dumps(document))


def environment(config_dir: Path, env: EngineEnv) -> dict[str, str]:
    """The CLI's environment: its own state directory, the endpoint and credential (the
    daemon's gateway and a pass for this session when there is a gateway, else the provider
    and its key; no other provider's, no Condensate setting), no auto-compaction, no outside
    traffic. Each call starts a session: with a gateway, the one before is retired."""
    if env.gateway is not None:
        base_url, key = env.gateway.url, env.gateway.issue()
    else:
        base_url, key = env.anthropic_base_url, env.anthropic_api_key
    return _child.child_environment(
        {
            "CLAUDE_CONFIG_DIR": str(config_dir),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": key,
            "DISABLE_AUTO_COMPACT": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",
        }
    )


async def write(process: asyncio.subprocess.Process, data: dict[str, Any]) -> None:
    """One stream-json line to the CLI's stdin; a CLI that has exited is not an error here
    (its turn reads the exit). Under uvloop a write to a pipe already closed is a
    RuntimeError, not a BrokenPipeError."""
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
        process.stdin.write((json.dumps(data) + "\n").encode())
        await process.stdin.drain()


def user_line(text: str, session_id: str) -> dict[str, Any]:
    """A human message as the CLI's stream-json input."""
    return {
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": None,
        "session_id": session_id,
    }


def interrupt_line(number: int) -> dict[str, Any]:
    """The control request that interrupts the CLI's turn; ``number`` keeps its id unique."""
    return {
        "type": "control_request",
        "request_id": f"condensate_{number}_{uuid.uuid4().hex[:8]}",
        "request": {"subtype": "interrupt"},
    }


def control_error(request_id: str, subtype: object) -> dict[str, Any]:
    """The answer to a control request from the CLI that Condensate does not serve."""
    return {
        "type": "control_response",
        "response": {
            "subtype": "error",
            "request_id": request_id,
            "error": f"Condensate does not answer {subtype!r} requests",
        },
    }


def permission_answer(request_id: str, verdict: Verdict, tool_input: Any) -> dict[str, Any]:
    """The answer to a ``can_use_tool`` prompt: allowed with its input unchanged, or denied
    with the reason the model reads."""
    answer: dict[str, Any] = (
        {"behavior": "allow", "updatedInput": tool_input}
        if verdict.allowed
        else {"behavior": "deny", "message": verdict.reason}
    )
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": answer},
    }


def launch(settings: EngineSettings, base_url: str, managed: bool, home: Path) -> Launch:
    """A person's own ``claude`` through the gateway: its pass is in ``ANTHROPIC_BASE_URL``,
    so it keeps its own login; while Condensate manages the session its own compaction is off
    (``DISABLE_AUTO_COMPACT``: the person's ``/compact`` still works, and is logged)."""
    own = own_settings(ClaudeSettings, settings)
    env = {"ANTHROPIC_BASE_URL": base_url}
    if managed:
        env["DISABLE_AUTO_COMPACT"] = "1"
    logins = (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "~/.claude/.credentials.json",
    )
    return Launch(resolve_binary(own.claude_binary), (), env, logins, "ANTHROPIC_API_KEY")


MODEL_ALIASES = {
    "opus": "claude-opus-5-5",
    "sonnet": "claude-sonnet-5-5",
    "haiku": "claude-haiku-5-5",
}
DEFAULT_MODEL = "claude-opus-5-5"
"""The pinned CLI's default model (``system/init``'s ``model``, 2.1.332)."""


def cli_model(args: Sequence[str]) -> str:
    """The model ``claude`` runs with these arguments: ``--model X`` (an alias read as the
    CLI reads it), else its default."""
    named = DEFAULT_MODEL
    for i, arg in enumerate(args):
        if arg == "--model" and i + 1 < len(args):
            named = args[i + 1]
        elif arg.startswith("--model="):
            named = arg.split("=", 1)[1]
    named = MODEL_ALIASES.get(named, named)
    return named if ":" in named else f"anthropic:{named}"
