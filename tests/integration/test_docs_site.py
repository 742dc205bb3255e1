"""The docs site builds: ``mkdocs build --strict`` (a broken link or anchor, a page left out
of the nav, a missing included file all fail it) passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.integration.daemon import REPO


def test_mkdocs_build_strict_passes(tmp_path: Path):
    """``mkdocs build --strict`` into a temporary directory exits 0 and writes the pages."""
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").exists()
