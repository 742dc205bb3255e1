"""What this project's machines do to the shells a test or benchmark starts, undone the way
the machine's own tools would undo it."""

from __future__ import annotations

import os
from pathlib import Path

PYENV_LOCK = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "shims" / ".pyenv-shim"
"""pyenv's rehash lock. Root's login profile here runs ``pyenv rehash``; every shell the
engines start is a login shell (the native tool, Claude Code's Bash, Codex's commands), and a
process SIGKILLed mid-profile (a CLI ending its command, a daemon killed with its children)
leaves the lock behind, which stalls every later login shell for 60 s."""


def rehash_running() -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"pyenv-rehash" in (entry / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def clear_stale_pyenv_lock() -> bool:
    """Remove pyenv's rehash lock when no rehash holds it (stale by pyenv's own rule: only a
    running rehash owns it); whether there was one to remove."""
    if PYENV_LOCK.exists() and not rehash_running():
        PYENV_LOCK.unlink(missing_ok=True)
        return True
    return False
