"""``python -I -S _reaper.py PARENT_PID [--stderr-log=PATH --stderr-cap=BYTES] COMMAND...``:
runs a CLI so that nothing it starts outlives the daemon, and keeps its stderr log capped.

A CLI's own children escape its process group: Claude Code runs each Bash command in a new
session, so when the CLI dies (by its parent-death signal, or a kill), the command lives on
under init. This small process sits between the daemon and the CLI as a child subreaper
(``PR_SET_CHILD_SUBREAPER``): whatever the CLI leaves behind is re-parented to it, not to
init, and it kills all of it when the CLI exits, when it is told to stop (SIGTERM, SIGINT,
SIGHUP) or when the daemon dies (its parent-death signal). The CLI's stdio is the reaper's,
inherited: the daemon talks to the CLI directly. It exits with the CLI's exit status.

With ``--stderr-log`` (the file the reaper's own stderr is), the CLI's stderr, and that of
everything it starts, is a pipe a thread of the reaper copies into that file: a write that
would take the file past ``--stderr-cap`` bytes first moves it to ``PATH.1`` (replacing the
one before) and starts a new one, so a CLI's stderr never takes more than twice the cap
however long it runs. What the CLI wrote last is in the file before the reaper exits.

Run as a file, not a module, with ``-I -S``: it imports nothing of Condensate, so it starts in
a few milliseconds. Linux only (prctl, /proc).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_SECONDS = 10.0
TERM_SECONDS = 0.3
DRAIN_SECONDS = 1.0
"""How long the reaper, about to exit, waits for the CLI's last stderr to reach the file."""
CHUNK = 65536
LOG_OPTION = "--stderr-log="
CAP_OPTION = "--stderr-cap="
_libc = ctypes.CDLL(None, use_errno=True)
_pumps: list[threading.Thread] = []


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent``, zombies included."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # A zombie counts until it is reaped: a many-threaded CLI's leader is a zombie while
        # its other threads still exit, and its children come to us only after they have.
        if int(fields[1]) == parent:
            found.append(int(name))
    return found


def reap() -> None:
    """Collect every child that has exited, without waiting."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_all() -> None:
    """End every descendant: each gets SIGTERM when first seen, so that a program holding a
    lock (a login profile's `pyenv rehash`, whose lock left behind stalls every later login
    shell) runs its exit trap, and SIGKILL if it is still there ``TERM_SECONDS`` later. A
    killed child's children are re-parented to us (we are a subreaper) once it has fully
    exited, which takes a many-threaded CLI a while; each of them gets its own SIGTERM and
    grace. Repeat until none is left (for at most ``KILL_SECONDS``)."""
    me = os.getpid()
    deadline = time.monotonic() + KILL_SECONDS
    termed: dict[int, float] = {}
    while time.monotonic() < deadline:
        reap()
        left = children(me)
        if not left:
            return
        now = time.monotonic()
        for pid in left:
            if pid not in termed:
                number = signal.SIGTERM
                termed[pid] = now
            elif now - termed[pid] >= TERM_SECONDS:
                number = signal.SIGKILL
            else:
                continue
            try:
                os.kill(pid, number)
            except ProcessLookupError:
                continue
        time.sleep(0.02)


def rotate(log: str) -> None:
    """``log`` becomes ``log.1`` and our stderr a new, empty ``log``; if the rename fails, the
    file is emptied instead: the cap holds either way."""
    try:
        os.replace(log, log + ".1")
        fresh = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
    except OSError:
        os.ftruncate(2, 0)
        return
    os.dup2(fresh, 2)
    os.close(fresh)


def write_all(data: bytes) -> None:
    """``data`` to our stderr; what a full disk refuses is dropped (the CLI must not block)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(2, view) :]
        except OSError:
            return


def pump(source: int, log: str, cap: int) -> None:
    """Copy the pipe ``source`` (the CLI's stderr) into our stderr, the file ``log``, moving
    it to ``log.1`` before a write would take it past ``cap`` bytes."""
    size = os.fstat(2).st_size
    while True:
        try:
            chunk = os.read(source, CHUNK)
        except OSError:
            return
        if not chunk:
            return
        if size and size + len(chunk) > cap:
            rotate(log)
            size = 0
        write_all(chunk)
        size += len(chunk)


def drain() -> None:
    """Let the stderr pump copy what is left (the CLI and all it started are gone, so the
    pipe ends), for at most ``DRAIN_SECONDS``."""
    for thread in _pumps:
        thread.join(DRAIN_SECONDS)


def options(args: list[str]) -> tuple[str | None, int, list[str]]:
    """The stderr log and its cap, and the command after them."""
    log, cap = None, 0
    while args and args[0].startswith((LOG_OPTION, CAP_OPTION)):
        option, args = args[0], args[1:]
        if option.startswith(LOG_OPTION):
            log = option.removeprefix(LOG_OPTION)
        else:
            cap = int(option.removeprefix(CAP_OPTION))
    return log, cap, args


def main(argv: list[str]) -> int:
    parent = int(argv[1])
    log, cap, command = options(argv[2:])
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the daemon died before the signal was armed
        return 1

    def stop(number: int, frame: object) -> None:
        # The parent-death signal comes again as each of the daemon's threads exits: the
        # first one does the work.
        for other in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(other, signal.SIG_IGN)
        kill_all()
        drain()
        os._exit(128 + number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, stop)
    stderr = os.pipe() if log else None
    cli = os.fork()
    if cli == 0:
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # dies with the reaper
        if stderr is not None:
            os.dup2(stderr[1], 2)
            os.close(stderr[0])
            os.close(stderr[1])
        try:
            os.execvp(command[0], command)  # noqa: S606 - the engine's own CLI command line
        except OSError as exc:
            sys.stderr.write(f"cannot run {command[0]}: {exc}\n")
            os._exit(127)
    if stderr is not None and log is not None:
        os.close(stderr[1])
        _pumps.append(threading.Thread(target=pump, args=(stderr[0], log, cap), daemon=True))
        _pumps[0].start()
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            drain()
            return 1
        if pid == cli:
            kill_all()  # what the CLI left running
            drain()
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code  # killed by a signal: 128 + its number


if __name__ == "__main__":
    sys.exit(main(sys.argv))
