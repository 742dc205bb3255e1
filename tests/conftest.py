"""Shared fixtures: every test starts with no CONDENSATE_* variables set, and the whole run
has a HOME of its own."""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _own_home() -> None:
    """Point HOME at a directory whose login profile only keeps this run's PATH. Every shell
    the tests start is a login shell (the native tool, Claude Code's Bash, Codex's commands),
    and a developer's profile is no part of what they test: on this project's machines root's
    runs `pyenv rehash`, whose lock, left behind by a shell killed mid-profile (as interrupt
    and crash tests do), stalls every later shell for 60 s."""
    home = Path(tempfile.mkdtemp(prefix="condensate-tests-home-"))
    (home / ".profile").write_text(f"export PATH={shlex.quote(os.environ.get('PATH', ''))}\n")
    os.environ["HOME"] = str(home)


_own_home()


@pytest.fixture(autouse=True)
def clean_environ() -> Iterator[None]:
    """Strip CONDENSATE_* so a developer's settings never leak into a test."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("CONDENSATE_")}
    for key in saved:
        del os.environ[key]
    yield
    for key in [k for k in os.environ if k.startswith("CONDENSATE_")]:
        del os.environ[key]
    os.environ.update(saved)
