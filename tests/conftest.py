"""Shared fixtures: every test starts with no CONDENSATE_* variables set and no configuration
file (the session's XDG_CONFIG_HOME is an empty directory of its own, which the daemons the
tests start inherit), and with no stale pyenv lock left by an earlier test."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from benchmarks.machine import clear_stale_pyenv_lock


def pytest_configure(config: pytest.Config) -> None:
    """A developer's ~/.config/condensate/env must not reach a test: the session (and every
    process it starts) reads an empty configuration directory of its own."""
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="condensate-test-config-")


@pytest.fixture(autouse=True)
def no_stale_pyenv_lock() -> None:
    """Remove pyenv's rehash lock when no rehash holds it. Every shell the tests start is a
    login shell (the native tool, Claude Code's Bash, Codex's commands); on this project's
    machines root's profile runs `pyenv rehash`, and a shell killed mid-profile (as interrupt,
    timeout and crash tests kill them) leaves its lock behind, which stalls every later login
    shell for 60 s. A lock no process holds is stale by pyenv's own rule."""
    clear_stale_pyenv_lock()


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
