"""``condensate claude [ARGS...]`` and ``condensate codex [ARGS...]``: the person's own CLI in
their own terminal, its provider requests through the daemon's gateway.

The wrapper asks the daemon for a thread of the session (``POST /attach``: it answers how to
start the CLI: the binary, the arguments before the person's, the variables to add, the pass
in the gateway's base URL), starts a daemon when none runs (and says so), runs the CLI with
the terminal as it is, its arguments untouched, and returns its exit code. The CLI's requests
pass through the wrapper's own loopback relay (``relay``), so that a daemon that dies
mid-session answers in the provider's shape rather than not at all. While the CLI runs
the wrapper ignores the terminal's Ctrl-C and Ctrl-\\ (the CLI gets them, as without
Condensate) and passes a hangup or a termination on to it. When the CLI exits the daemon is
told (``POST /threads/:id/detach``); if the wrapper itself is killed, the daemon sees its
process gone and ends the session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from condensate import api
from condensate.cli.relay import Relay
from condensate.client import DaemonClient, DaemonError
from condensate.engine.registry import installed
from condensate.settings import Settings

NO_MANAGE = "--no-manage"
HEAD = "--head"
START_WAIT = 30.0
"""Seconds the wrapper waits for a daemon it started to answer."""


def wrapped() -> list[str]:
    """The engines whose CLI a person can run through the daemon (``condensate <name>``)."""
    return [name for name, info in installed().items() if info.launch is not None]


@dataclass(frozen=True)
class Wrapping:
    """What the wrapper's own leading options say, and the CLI's arguments after them."""

    manage: bool = True
    head: bool = False
    cli_args: tuple[str, ...] = ()


def split_args(argv: Sequence[str]) -> Wrapping:
    """The wrapper's options and the CLI's arguments: only leading ``--no-manage`` and
    ``--head`` (or a ``--`` before the CLI's own) are the wrapper's."""
    rest = list(argv)
    manage, head = True, False
    while rest and rest[0] in (NO_MANAGE, HEAD, "--"):
        option = rest.pop(0)
        if option == "--":
            break
        manage = manage and option != NO_MANAGE
        head = head or option == HEAD
    return Wrapping(manage, head, tuple(rest))


def cmd_wrap(settings: Settings, engine: str, argv: Sequence[str]) -> int:
    wrapping = split_args(argv)
    manage, cli_args = wrapping.manage, list(wrapping.cli_args)
    client = _daemon(settings)
    body = api.Attach(
        engine=engine,
        cwd=str(Path.cwd()),
        args=cli_args,
        manage=manage,
        head=wrapping.head,
        pid=os.getpid(),
    )
    attached = client.attach(body)
    thread = attached.thread.id
    how = "managed" if manage else "costs and logging only"
    sys.stderr.write(
        f"condensate: {engine} runs as thread {thread} ({how}); follow it with "
        f"condensate tail -f {thread}\n"
    )
    launch = attached.launch
    relay = Relay(client.url)
    through = relay.start()
    # The CLI reaches the daemon through the relay: a daemon that is down answers in the
    # provider's shape (the daemon's address swapped for the relay's wherever it is given).
    env = {**os.environ, **{k: v.replace(client.url, through) for k, v in launch.env.items()}}
    args = [a.replace(client.url, through) for a in launch.args]
    if launch.key_variable and not has_login(launch.logins, os.environ):
        env[launch.key_variable] = launch.key  # the daemon's credential is used for it
        args += launch.keyless_args
    try:
        code = run_in_terminal([launch.binary, *args, *cli_args], env)
    finally:
        relay.stop()
    try:
        client.detach(thread, max(-255, min(code, 255)))
    except DaemonError as exc:
        sys.stderr.write(f"condensate: the daemon was not told the CLI exited: {exc}\n")
    return code


def has_login(logins: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether the person has a login of their own: a variable set, or a file in their home."""
    for login in logins:
        if login.startswith("~/"):
            if Path(login).expanduser().exists():
                return True
        elif env.get(login):
            return True
    return False


def run_in_terminal(command: list[str], env: dict[str, str]) -> int:
    """Run ``command`` in this terminal and return its exit code (128 + N for signal N, as a
    shell says it). The terminal's own signals reach the CLI (its process group is ours);
    this process ignores them meanwhile, and hands a hangup or a termination on."""
    child = subprocess.Popen(command, env=env)  # noqa: S603 - the daemon's CLI, the person's args

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
        signal.SIGQUIT: signal.signal(signal.SIGQUIT, signal.SIG_IGN),
        signal.SIGTERM: signal.signal(signal.SIGTERM, pass_on),
        signal.SIGHUP: signal.signal(signal.SIGHUP, pass_on),
    }
    try:
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def _daemon(settings: Settings) -> DaemonClient:
    """The running daemon; one started (and said so) when none answers."""
    try:
        return _answering(settings)
    except DaemonError as exc:
        if exc.code not in ("unreachable", "no-token"):
            raise
    log_file = settings.home / "daemon.log"
    settings.home.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:
        started = subprocess.Popen(
            [sys.executable, "-m", "condensate", "serve"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # it outlives this terminal
        )
    sys.stderr.write(
        f"condensate: no daemon was running; started one (pid {started.pid}, its log in "
        f"{log_file})\n"
    )
    deadline = time.monotonic() + START_WAIT
    while True:
        try:
            return _answering(settings)
        except DaemonError as exc:
            if started.poll() is not None or time.monotonic() > deadline:
                msg = f"The daemon did not start (see {log_file}): {exc}"
                raise DaemonError(code="daemon-not-started", detail=msg) from exc
            time.sleep(0.2)


def _answering(settings: Settings) -> DaemonClient:
    """The daemon's client, once it answers (``DaemonError`` while it does not)."""
    client = DaemonClient.find(settings)
    client.health()
    return client
