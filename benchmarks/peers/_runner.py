"""The child's side: reads the ``Job``, gives the peer the two tools, runs the human turns in
order and reports each as one JSON line. Standard library only: it runs on each peer's own
interpreter.

The events go to the child's original stdout, which is then pointed at stderr, so nothing a
peer prints (a banner, a progress line) can mix into them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from benchmarks.peers import Job

READ_DESCRIPTION = (
    "Read a text file and return its contents. `path` is relative to the working directory "
    "(or absolute)."
)
SHELL_DESCRIPTION = (
    "Run a bash command in the working directory and return its stdout and stderr, followed "
    "by its exit code."
)
SHELL_TIMEOUT = 120.0
"""Seconds a command may run before it is killed (its result then says so)."""
OUTPUT_LIMIT = 1_000_000
"""Characters of a command's output returned; a peer's own limits act on what comes back."""


class Tools:
    """``read`` and ``shell`` in the job's working directory. They never raise: a failure is
    the tool's answer, as a real tool's would be. ``calls`` counts both."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.calls = 0

    def read(self, path: str) -> str:
        self.calls += 1
        try:
            return (self.workdir / path).read_text(errors="replace")
        except OSError as exc:
            return f"error: cannot read {path}: {exc.strerror or exc}"

    def shell(self, command: str) -> str:
        self.calls += 1
        # A session of its own, so a command that times out is ended with what it started.
        process = subprocess.Popen(  # noqa: S603 - running the model's command is the tool
            ["/bin/bash", "-c", command],
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=SHELL_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            text = output.decode(errors="replace")[-OUTPUT_LIMIT:]
            return f"{text}\n[timed out after {SHELL_TIMEOUT:g} s]"
        text = output.decode(errors="replace")[-OUTPUT_LIMIT:]
        return f"{text}\n[exit code {process.returncode}]"


class Reporter:
    """Writes the events on the child's original stdout."""

    def __init__(self) -> None:
        self._out: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)

    def send(self, **event: Any) -> None:
        self._out.write(json.dumps(event) + "\n")
        self._out.flush()


def read_job() -> Job:
    data = json.loads(sys.stdin.readline())
    return Job(
        base_url=data["base_url"],
        model=data["model"],
        workdir=data["workdir"],
        human_turns=tuple(data["human_turns"]),
        condenser_args=data.get("condenser_args") or {},
    )


def run_turns(
    job: Job,
    reporter: Reporter,
    tools: Tools,
    answer: Callable[[str], str],
    condensations: Callable[[], int],
) -> None:
    """Sends each human turn through ``answer`` (the peer's loop until its text answer) and
    reports it. The first failed turn ends the run: the peer's conversation after it is not
    the one the later turns were written for."""
    for index, text in enumerate(job.human_turns):
        started = time.monotonic()
        calls, condensed = tools.calls, condensations()
        reply: str | None = None
        error: str | None = None
        try:
            reply = answer(text)
        except Exception as exc:  # any failure of the peer is the turn's outcome
            error = f"{type(exc).__name__}: {exc}"
        reporter.send(
            event="turn",
            index=index,
            answer=reply,
            error=error,
            seconds=round(time.monotonic() - started, 3),
            tool_calls=tools.calls - calls,
            condensations=condensations() - condensed,
        )
        if error is not None:
            return
