"""The ``claude`` CLI as a child process: which binary (the pinned version, or refused), its
command line and environment, starting and stopping it, and the stream-json lines written to
its stdin. It knows nothing of turns or of the log; the engine decides what to start and send.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from condensate import mcp
from condensate.engine import EngineEnv, ThreadSpec
from condensate.errors import ConfigError
from condensate.providers import parse_model

PINNED_VERSION = "2.1.332"
"""The version ``package.json`` pins; a CLI of another major.minor is refused."""
INSTALL_HINT = (
    "run `npm ci` in the Condensate repository (it installs the pinned "
    f"@anthropic-ai/claude-code@{PINNED_VERSION}), or `npm install -g "
    f"@anthropic-ai/claude-code@{PINNED_VERSION}`, or point CONDENSATE_CLAUDE_BINARY at one"
)
REPO = Path(__file__).resolve().parents[2]
LINE_LIMIT = 64 * 1024 * 1024
"""A stream-json line holds a whole tool result; asyncio's 64 KiB default is far too small."""
STOP_GRACE_SECONDS = 5.0
CLAUDE_MODES = frozenset({"acceptEdits", "bypassPermissions", "plan", "dontAsk", "auto"})
"""Claude Code's own permission modes, passed through as given."""

MCP_SERVER = mcp.SERVER_NAME
"""Claude Code names the head's tools ``mcp__condensate__<tool>``."""

_versions: dict[str, str] = {}


def resolve_binary(configured: str | None) -> str:
    """The CLI to run: the setting, else the repo's pinned one, else ``claude`` on PATH."""
    if configured:
        found = shutil.which(configured)
        if found is None:
            msg = f"CONDENSATE_CLAUDE_BINARY={configured!r} is not an executable; {INSTALL_HINT}."
            raise ConfigError(msg)
        return found
    pinned = REPO / "node_modules" / ".bin" / "claude"
    if pinned.exists():
        return str(pinned)
    found = shutil.which("claude")
    if found is None:
        msg = f"The Claude Code CLI (`claude`) was not found; {INSTALL_HINT}."
        raise ConfigError(msg)
    return found


def check_version(binary: str) -> str:
    """``claude --version``'s version, once per binary; refuses another major.minor."""
    if binary in _versions:
        return _versions[binary]
    try:
        done = subprocess.run(  # noqa: S603 - the operator's configured binary
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        msg = f"Could not run {binary} --version ({exc}); {INSTALL_HINT}."
        raise ConfigError(msg) from exc
    version = done.stdout.strip().split(" ", 1)[0]
    wanted = PINNED_VERSION.rsplit(".", 1)[0]
    if done.returncode != 0 or version.rsplit(".", 1)[0] != wanted:
        shown = version or done.stderr.strip()[:200] or f"exit {done.returncode}"
        msg = (
            f"{binary} is Claude Code {shown!r}, but Condensate drives {wanted}.x "
            f"(pinned {PINNED_VERSION}); {INSTALL_HINT}."
        )
        raise ConfigError(msg)
    _versions[binary] = version
    return version


def permission_mode(permissions: str) -> str:
    """A thread's permissions as a Claude Code ``--permission-mode``.

    ``default`` becomes ``bypassPermissions``: Condensate answers no permission prompts yet,
    and a headless Claude Code in its own ``default`` mode silently denies every write and
    every command that is not read-only, so an unattended thread could do nothing. Claude
    Code's own mode names pass through.
    """
    if permissions == "default":
        return "bypassPermissions"
    if permissions in CLAUDE_MODES:
        return permissions
    known = ", ".join(sorted({"default", *CLAUDE_MODES}))
    msg = f"Permissions {permissions!r} mean nothing to Claude Code; use one of: {known}."
    raise ConfigError(msg)


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
    ``mcp_config`` is a head's tools (Condensate's MCP server, and no other)."""
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
        "--permission-mode",
        permission_mode(spec.permissions),
    ]
    if spec.tools:
        tools = [*spec.tools, f"mcp__{MCP_SERVER}"] if mcp_config else list(spec.tools)
        args += ["--allowedTools", ",".join(tools)]
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


def write_mcp_config(config_dir: Path, env: EngineEnv) -> Path:
    """The ``--mcp-config`` file of a head: Condensate's tools for its thread, mode 0600 (it
    holds the API token)."""
    path = config_dir / "condensate-mcp.json"
    document = mcp.config(sys.executable, env.daemon_url, env.daemon_token, env.thread_id)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(document, handle)
    return path


def environment(config_dir: Path, env: EngineEnv) -> dict[str, str]:
    """The CLI's environment: its own state directory, the provider, no auto-compaction."""
    # The child inherits the daemon's environment (PATH, HOME, locale) less Condensate's
    # own settings and anything that would make it believe it runs inside Claude Code.
    child = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CONDENSATE_") and k not in ("CLAUDECODE", "ANTHROPIC_AUTH_TOKEN")
    }
    child.update(
        {
            "CLAUDE_CONFIG_DIR": str(config_dir),
            "ANTHROPIC_BASE_URL": env.anthropic_base_url,
            "ANTHROPIC_API_KEY": env.anthropic_api_key,
            "DISABLE_AUTO_COMPACT": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",
        }
    )
    return child


async def spawn(
    args: list[str], *, cwd: str, config_dir: Path, env: dict[str, str]
) -> asyncio.subprocess.Process:
    """Start the CLI with piped stdin and stdout; its stderr goes to ``stderr.log``."""
    with (config_dir / "stderr.log").open("ab") as stderr:
        return await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            limit=LINE_LIMIT,
        )


async def stop(process: asyncio.subprocess.Process) -> None:
    """Close stdin and let the CLI flush its transcript; then SIGTERM, then SIGKILL."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, RuntimeError):
            process.stdin.close()
    for signal_it in (None, process.terminate, process.kill):
        if signal_it is not None:
            with contextlib.suppress(ProcessLookupError):
                signal_it()
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_SECONDS)
        except TimeoutError:
            continue
        return


async def write(process: asyncio.subprocess.Process, data: dict[str, Any]) -> None:
    """One stream-json line to the CLI's stdin; a CLI that has exited is not an error here."""
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
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


def stderr_tail(config_dir: Path) -> str:
    """The end of the CLI's ``stderr.log``, for a notice that it exited."""
    path = config_dir / "stderr.log"
    if not path.exists():
        return "no stderr"
    tail = path.read_bytes()[-400:].decode(errors="replace").strip()
    return f"stderr: {tail}" if tail else "no stderr"
