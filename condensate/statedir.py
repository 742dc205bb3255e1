"""The state directory: private to its owner (0700, its files 0600), whichever command makes
it, and held by one daemon at a time.

A wider directory or file found at start is tightened (group and other bits removed) and
named in a warning. The lock is an ``flock`` on ``daemon.lock``, held for the daemon's life
and released by the kernel however the daemon ends, so a SIGKILL leaves no stale lock. A
directory that cannot be made, written or tightened is a ``ConfigError`` naming
CONDENSATE_HOME. A daemon that has the lock clears the CLI engines' per-thread directories
the daemon before it left (``clear_thread_dirs``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
from collections.abc import Iterable, Iterator
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
        pid = os.read(descriptor, 64).decode(errors="replace").strip()
        os.close(descriptor)
        raise StateDirectoryBusy(_busy_message(home, pid)) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


def holder(home: Path) -> str | None:
    """The pid of the daemon that holds ``home`` (as its lock file says), or None when none
    does."""
    try:
        descriptor = os.open(home / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(descriptor, 64, 0).decode(errors="replace").strip()
    else:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


def starting(home: Path) -> bool:
    """Whether a daemon holds ``home`` but serves nothing yet: it took the lock and is still
    recovering its threads (``daemon.json`` is written once it answers)."""
    held = holder(home)
    if held is None:
        return False
    try:
        marker = json.loads((home / DAEMON_FILE).read_text())
    except (OSError, ValueError):
        return True
    return not isinstance(marker, dict) or str(marker.get("pid")) != held


def _busy_message(home: Path, held_by: str) -> str:
    url = "still starting"
    try:
        marker = json.loads((home / DAEMON_FILE).read_text())
        if str(marker.get("pid")) == held_by:
            url = f"serving {marker['url']}"
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    pid = held_by or "unknown"
    return (
        f"Another daemon (pid {pid}, {url}) holds the state directory {home}; stop it, or give "
        "this one another CONDENSATE_HOME."
    )


def clear_thread_dirs(home: Path, names: Iterable[str]) -> list[str]:
    """Remove every per-thread directory under ``home/<name>`` (a CLI's own state: its
    sessions, config and stderr log) that no live process names in its environment; those
    removed, as ``name/thread``. Only for a daemon that has just taken the lock, before it
    recovers a thread: no other daemon uses ``home``, the CLIs of the one before died with it
    (their subreaper, their parent-death signal), and no CLI session outlives a restart (a
    recovered thread starts a fresh session from its view). A failure is logged, never
    raised: a directory left behind costs disk, not a start."""
    owned = {name for name in names if (home / name).is_dir() and not (home / name).is_symlink()}
    used = _named_in_environments(home, owned)
    removed: list[str] = []
    for name in sorted(owned):
        for entry in sorted(os.scandir(home / name), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False) or (name, entry.name) in used:
                continue
            try:
                shutil.rmtree(entry.path)
            except OSError as exc:
                log.warning("thread_dir_not_removed", path=entry.path, error=str(exc))
                continue
            removed.append(f"{name}/{entry.name}")
    if removed or used:
        log.info(
            "thread_dirs_cleared",
            removed=len(removed),
            kept_in_use=sorted(f"{name}/{thread}" for name, thread in used),
        )
    return removed


def _named_in_environments(home: Path, names: set[str]) -> set[tuple[str, str]]:
    """``(name, thread)`` for each ``home/name/thread`` (or a path under it) that a live
    process this user can read has in its environment (a CLI's CLAUDE_CONFIG_DIR, CODEX_HOME;
    whatever it started inherits them)."""
    prefix = f"{home}/"
    used: set[tuple[str, str]] = set()
    if not names:
        return used
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                variables = handle.read().split(b"\0")
        except OSError:  # gone, another user's, or not dumpable
            continue
        for variable in variables:
            value = variable.partition(b"=")[2].decode(errors="replace")
            if value.startswith(prefix):
                parts = value[len(prefix) :].split("/")
                if len(parts) >= 2 and parts[0] in names and parts[1]:
                    used.add((parts[0], parts[1]))
    return used
