"""The state directory: private to its owner (0700, its files 0600), whichever command makes
it, and held by one daemon at a time.

A wider directory or file found at start is tightened (group and other bits removed) and
named in a warning. The lock is an ``flock`` on ``daemon.lock``, held for the daemon's life
and released by the kernel however the daemon ends, so a SIGKILL leaves no stale lock. A
directory that cannot be made, written or tightened is a ``ConfigError`` naming
CONDENSATE_HOME.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog

from condensate.errors import ConfigError, TemporaryFailure

log = structlog.get_logger()

DIR_MODE = 0o700
FILE_MODE = 0o600
LOCK_FILE = "daemon.lock"
DAEMON_FILE = "daemon.json"
NAMED_IN_WARNING = 20


class StateDirectoryBusy(TemporaryFailure):
    """Another daemon holds the state directory's lock (it may let go: not a setting's
    fault)."""

    code = "state-directory-busy"


@contextmanager
def usable(home: Path) -> Iterator[None]:
    """An ``OSError`` on the state directory (not a directory, not writable, not ours to
    chmod) as a ``ConfigError`` naming CONDENSATE_HOME: a restart cannot fix it."""
    try:
        yield
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(home) else ""
        msg = (
            f"The state directory {home} cannot be used: {exc.strerror or exc}{where}; point "
            "CONDENSATE_HOME at a directory this user owns and can write."
        )
        raise ConfigError(msg) from exc


def prepare(home: Path) -> list[str]:
    """Create ``home`` 0700, or tighten it and everything under it; the paths tightened."""
    with usable(home):
        return _prepare(home)


def _prepare(home: Path) -> list[str]:
    home.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    tightened: list[str] = []
    for path in [home, *_tree(home)]:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            continue
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            path.chmod(mode & 0o700)
            tightened.append(f"{path.relative_to(home) if path != home else '.'} ({mode:o})")
    if tightened:
        log.warning(
            "state_directory_tightened",
            home=str(home),
            count=len(tightened),
            paths=tightened[:NAMED_IN_WARNING],
        )
    return tightened


def _tree(home: Path) -> list[Path]:
    found: list[Path] = []
    for root, dirs, files in os.walk(home):
        found += [Path(root, name) for name in (*dirs, *files)]
    return found


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600, replacing it whole (readers never see half)."""
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.replace(partial, path)


def hold(home: Path) -> int:
    """Take the state directory's lock for this process's life; its descriptor (keep it
    open), creating ``home`` if need be. Raises StateDirectoryBusy naming the daemon that
    holds it."""
    path = home / LOCK_FILE
    with usable(home):
        home.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(descriptor, 64).decode(errors="replace").strip()
        os.close(descriptor)
        raise StateDirectoryBusy(_busy_message(home, holder)) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


def _busy_message(home: Path, holder: str) -> str:
    url = "still starting"
    try:
        marker = json.loads((home / DAEMON_FILE).read_text())
        if str(marker.get("pid")) == holder:
            url = f"serving {marker['url']}"
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    pid = holder or "unknown"
    return (
        f"Another daemon (pid {pid}, {url}) holds the state directory {home}; stop it, or give "
        "this one another CONDENSATE_HOME."
    )
