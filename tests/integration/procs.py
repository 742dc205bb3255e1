"""Processes by parent chain, read from /proc: what a daemon started and what is still alive
after it died."""

from __future__ import annotations

import time
from pathlib import Path


def parent_of(pid: int) -> int | None:
    """The parent pid of a live process; None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1])


def descendants(root: int) -> dict[int, str]:
    """Every live process under ``root`` (by parent chain), with its command line."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = parent_of(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            try:
                found[child] = (
                    Path(f"/proc/{child}/cmdline")
                    .read_bytes()
                    .replace(b"\0", b" ")[:200]
                    .decode(errors="replace")
                )
            except OSError:
                continue
            stack.append(child)
    return found


def alive(pids: dict[int, str]) -> dict[int, str]:
    return {pid: cmd for pid, cmd in pids.items() if parent_of(pid) is not None}


def environ_of(pid: int) -> dict[str, str]:
    """A live process's environment (``/proc/<pid>/environ``)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def exec_laid_out(pid: int, marker: str, timeout: float = 10.0) -> None:
    """Wait until the program ``pid`` runs shows ``marker`` in its environment. Popen returns
    once exec has begun, before the kernel lays out the new program's arguments and
    environment: /proc shows both empty for that moment."""
    deadline = time.monotonic() + timeout
    environ = Path(f"/proc/{pid}/environ")
    while marker.encode() not in environ.read_bytes():
        assert time.monotonic() < deadline, f"pid {pid}'s environment never showed {marker}"
        time.sleep(0.01)
