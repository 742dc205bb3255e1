"""The native loop's shell tool: a command run with ``bash -lc`` in its own process group.

Output is collected as it arrives and kept to the output cap; a timeout, a cancellation from
outside, or the command's exit kills the whole group, so nothing it started keeps running.
The command gets the daemon's environment without its secrets (``adapters._secrets``), and
the same rule runs again in bash once the login profile has run, since a profile may export
a key of its own.
Never raises: a command that cannot start or fails comes back as an error outcome.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc

from adapters._child import reaped
from adapters._secrets import UNSET_SECRETS, scrubbed
from adapters.native.output import HeadTail
from adapters.tool_contract import (
    SHELL_PARAMETERS,
    ToolContext,
    ToolOutcome,
    argument_problem,
    failed,
    text_argument,
)
from condensate.core.receipts import short

_NO_OUTPUT = "(no output)\n"
_DRAIN_GRACE = 2.0  # seconds to collect output once the command and its group are gone
_TERM_GRACE = 0.5  # seconds between the SIGTERM and the SIGKILL that ends a command's group


async def shell(ctx: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
    """Run a command with ``bash -lc`` in cwd: stdout and stderr interleaved, then the exit
    code. A non-zero exit is an error; a timeout kills the command's whole process group."""
    argument = short(text_argument(arguments, "command"))
    if problem := argument_problem("shell", arguments, SHELL_PARAMETERS):
        return failed(problem, argument)
    command: str = arguments["command"]
    if not command.strip():
        return failed("shell: command is empty.", argument)
    try:
        process = await anyio.open_process(
            # Under the reaper: a SIGKILLed daemon leaves no command of the model's running.
            reaped(["/bin/bash", "-lc", UNSET_SECRETS + command]),
            cwd=ctx.cwd,
            env=scrubbed(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a kill reaches grandchildren
        )
    except OSError as exc:
        return failed(f"shell: cannot start /bin/bash in {ctx.cwd}: {exc}.", argument)
    kept = HeadTail(ctx.output_cap)
    try:
        timed_out = await _supervise(process, kept, ctx.shell_timeout)
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:  # cancelled from outside: leave nothing running
                await _end_group(process)
            await process.aclose()
    output = kept.text()
    if output and not output.endswith("\n"):
        output += "\n"
    if timed_out:
        note = f"[timed out after {ctx.shell_timeout:g} s; killed its process group]"
        return failed(output + note, argument)
    code = process.returncode
    return ToolOutcome(f"{output or _NO_OUTPUT}[exit code {code}]", code != 0, argument)


async def _supervise(process: anyio.abc.Process, kept: HeadTail, limit: float) -> bool:
    """Collect output until the command exits or ``limit`` seconds pass; True if it timed out.
    Background jobs the command left in its group are killed once it exits, since no later
    call could reach them; the drain grace covers any that escaped the group."""
    assert process.stdout is not None
    stdout = process.stdout
    drained = anyio.Event()

    async def drain() -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        async for chunk in stdout:
            kept.feed(decoder.decode(chunk))
        kept.feed(decoder.decode(b"", final=True))
        drained.set()

    async with anyio.create_task_group() as group:
        group.start_soon(drain)
        with anyio.move_on_after(limit) as deadline:
            await process.wait()
        await _end_group(process)
        with anyio.move_on_after(_DRAIN_GRACE):
            await drained.wait()
        group.cancel_scope.cancel()
    return deadline.cancelled_caught


async def _end_group(process: anyio.abc.Process) -> None:
    """End the command's whole process group: SIGTERM first, so that a program holding a lock
    (a login profile's `pyenv rehash`) runs its exit trap and lets go of it, then SIGKILL for
    whatever is left after a short grace."""
    _signal_group(process.pid, signal.SIGTERM)
    if process.returncode is None:
        with anyio.move_on_after(_TERM_GRACE):
            await process.wait()
    _signal_group(process.pid, signal.SIGKILL)


def _signal_group(pgid: int, number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, number)
