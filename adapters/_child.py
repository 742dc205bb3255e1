"""What the CLI engines share about their child process: its environment, starting it with
piped stdio and its stderr in a capped file, and stopping it (``_pinned`` finds the binary).

A CLI child dies with the daemon (SIGKILL and the OOM killer included), and so does
everything it started. Both CLIs leave processes behind that outlive them (Claude Code runs
each Bash command in a session of its own; Codex's shell snapshot and its commands' login
profiles live on), so both run under ``_reaper`` (a few-millisecond Python process, a child
subreaper with a parent-death signal), which ends the CLI and every process it left behind
when the daemon dies, when it is stopped, or when the CLI exits. Without the reaper a child
gets its parent-death signal set to SIGKILL (``prctl(PR_SET_PDEATHSIG)``). The kernel sends
the parent-death signal when the *thread* that forked the child ends; the CLIs are spawned
from the event loop's thread, which lives as long as the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

import anyio

from adapters._secrets import scrubbed

LINE_LIMIT = 64 * 1024 * 1024
"""A line holds a whole tool result; asyncio's 64 KiB default is far too small."""
STOP_GRACE_SECONDS = 5.0
KILL_GRACE_SECONDS = 0.2
STDERR_LOG = "stderr.log"
STDERR_CAP = 1024 * 1024
"""A CLI's ``stderr.log`` moves to ``stderr.log.1`` before a write would take it past this,
so a thread's CLI keeps at most twice it of stderr (``_reaper``)."""
TAIL_BYTES = 400

REAPER = Path(__file__).with_name("_reaper.py")
PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
"""Looked up once here: the forked child, before exec, only makes the call."""


FOREIGN_PREFIXES = (
    "CONDENSATE_",
    "ANTHROPIC_",
    "OPENAI_",
    "AZURE_OPENAI_",
    "CLAUDE_",
    "CODEX_",
    "GEMINI_",
    "GOOGLE_GENAI_",
    "VERTEX_",
    "MISTRAL_",
    "GROQ_",
    "DEEPSEEK_",
    "OPENROUTER_",
    "XAI_",
    "TOGETHER_",
    "COHERE_",
    "FIREWORKS_",
)
"""Condensate's settings, every provider's variables, and the CLIs' own (which the engine
sets itself): none reaches a CLI child from the daemon's environment."""
FOREIGN_NAMES = frozenset(
    {
        "CLAUDECODE",
        "GOOGLE_API_KEY",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
    }
)
"""Other names that carry a provider's credential, or make a CLI think it runs inside one."""


def foreign(name: str) -> bool:
    """A variable a CLI child does not inherit: a Condensate setting, a provider's variable
    or credential (any ``*_API_KEY`` too), or a CLI's own setting."""
    upper = name.upper()
    return (
        upper.startswith(FOREIGN_PREFIXES) or upper in FOREIGN_NAMES or upper.endswith("_API_KEY")
    )


def child_environment(
    own: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A CLI child's environment: the daemon's (PATH, HOME, locale, proxies) without its
    secrets (the rule the native shell's commands get, ``adapters._secrets``) or any
    ``foreign`` variable, plus ``own``: that engine's credential, base URL and settings."""
    inherited = os.environ if environ is None else environ
    child = {k: v for k, v in scrubbed(inherited).items() if not foreign(k)}
    child.update(own)
    return child


def _die_with(parent: int) -> None:
    """In the forked child, before exec: SIGKILL when the parent dies, and at once if it
    already has (it died between the fork and this call)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def reaped(args: list[str], stderr_log: Path | None = None) -> list[str]:
    """``args`` run under ``_reaper``: the command and everything it starts die with the
    daemon, and what it leaves running is killed when it exits. With ``stderr_log`` (the
    reaper's own stderr), the reaper copies the command's stderr there, capped."""
    capped = [f"--stderr-log={stderr_log}", f"--stderr-cap={STDERR_CAP}"] if stderr_log else []
    return [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), *capped, *args]


def rotated(log: Path, cap: int = STDERR_CAP) -> None:
    """Move ``log`` to ``log.1`` (replacing the one before) when it has reached ``cap``."""
    with contextlib.suppress(FileNotFoundError):
        if log.stat().st_size >= cap:
            log.replace(log.with_name(log.name + ".1"))


async def spawn(
    args: list[str], *, cwd: str, state_dir: Path, env: dict[str, str], reaper: bool = False
) -> asyncio.subprocess.Process:
    """Start a CLI with piped stdin and stdout, its stderr in ``state_dir/stderr.log``, dying
    with the daemon. With ``reaper`` it runs under ``_reaper``, for a CLI whose own children
    would outlive it (both CLIs): the process returned is then the reaper's, stopping or
    killing it ends the CLI and all it started, and the reaper keeps the log under
    ``STDERR_CAP`` as it writes. Without, the CLI is the child itself, with its parent-death
    signal set, and the log is only rotated here, at its start."""
    parent = os.getpid()
    path = state_dir / STDERR_LOG
    rotated(path)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(log, "ab") as stderr:
        return await asyncio.create_subprocess_exec(
            *(reaped(args, stderr_log=path) if reaper else args),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            limit=LINE_LIMIT,
            preexec_fn=None if reaper else lambda: _die_with(parent),  # one prebound libc call
        )


async def stop(process: asyncio.subprocess.Process, grace: float = STOP_GRACE_SECONDS) -> None:
    """Close stdin and let the CLI flush its state; then SIGTERM, then SIGKILL, ``grace``
    seconds apart."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, RuntimeError):
            process.stdin.close()
    for signal_it in (None, process.terminate, process.kill):
        if signal_it is not None:
            with contextlib.suppress(ProcessLookupError):
                signal_it()
        try:
            await asyncio.wait_for(process.wait(), grace)
        except TimeoutError:
            continue
        return


async def exit_status(process: asyncio.subprocess.Process) -> int | None:
    """The child's exit status once it has exited, even when the event loop has not reaped it
    yet (killed a moment ago: its status reaches the loop a little later, and a message sent
    meanwhile would be written to a dead process); None while it runs. The OS is asked
    without reaping the child (``WNOWAIT``), so the loop's own wait still collects it."""
    if process.returncode is None and not _exited(process.pid):
        return None
    return await process.wait()


def _exited(pid: int) -> bool:
    """Whether the child ``pid`` has exited: asked without waiting, and without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # reaped already: the loop is taking its status


async def kill(process: asyncio.subprocess.Process) -> None:
    """End a CLI now, whatever it was doing (a cancelled turn left it mid-turn), shielded
    from the cancellation that asked for it."""
    with anyio.CancelScope(shield=True):
        await stop(process, grace=KILL_GRACE_SECONDS)


def _last_bytes(path: Path, count: int) -> bytes:
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - count))
            return handle.read(count)
    except OSError:
        return b""


def stderr_tail(state_dir: Path) -> str:
    """The end of a CLI's ``stderr.log`` (reaching into ``stderr.log.1`` when the log was
    just rotated), for a notice that it exited."""
    path = state_dir / STDERR_LOG
    tail = _last_bytes(path, TAIL_BYTES)
    if len(tail) < TAIL_BYTES:
        tail = _last_bytes(path.with_name(path.name + ".1"), TAIL_BYTES - len(tail)) + tail
    text = tail.decode(errors="replace").strip()
    return f"stderr: {text}" if text else "no stderr"


def write_private(path: Path, text: str) -> Path:
    """Write a file only its owner can read (it holds a token or a key)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    return path
