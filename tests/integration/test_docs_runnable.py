"""Every shell block of the docs marked ``<!-- runnable -->`` runs as written: its commands one
after another in bash, in a temporary directory that holds a link to the repository's
``.venv``, with the quickstart test's environment (state and configuration directories of its
own, free ports); each exits 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.daemon import REPO
from tests.integration.docs_shell import DOCS, Shell, commands, environment, marked

BLOCKS = [
    pytest.param(text, id=f"{page.relative_to(DOCS)}:{line}")
    for page in sorted(DOCS.rglob("*.md"))
    for line, text in marked(page.read_text(), "runnable")
]


def test_the_docs_mark_runnable_blocks():
    """The docs mark at least one block runnable on each page that promises one (the command
    line and the configuration), so the test below runs something."""
    pages = {str(block.id).split(":")[0] for block in BLOCKS}
    assert {"cli.md", "configuration.md"} <= pages


@pytest.mark.parametrize("text", BLOCKS)
def test_a_runnable_block_runs(text: str, tmp_path: Path):
    """Each command of the block exits 0, in order, in one environment."""
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(REPO / ".venv")
    shell = Shell(environment(tmp_path), tmp_path, cwd=work)
    try:
        for command in commands(text):
            done = shell.run(command)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
    finally:
        shell.stop()
