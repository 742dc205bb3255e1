"""Shared fixtures: every test starts with no CONDENSATE_* variables set."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


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
