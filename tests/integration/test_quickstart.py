"""The quickstart page, run as written: each command of its marked blocks in bash from the
repository root, a server started with ``&`` (or ``condensate serve``, which a person leaves
running in its own terminal) in the background until it answers. The test's environment only
gives the state and configuration directories and free ports; the key path's provider is the
fake server, which accepts nothing but the key the page writes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from condensate.testing.fake_model import FakeModelServer
from tests.integration.daemon import REPO
from tests.integration.docs_shell import DOCS, Shell, commands, environment
from tests.integration.docs_shell import block as marked_block

QUICKSTART = (DOCS / "quickstart.md").read_text()
FAKE_PORT = "18080"


def block(name: str) -> str:
    """The quickstart page's bash block after ``<!-- quickstart:NAME -->``."""
    return marked_block(QUICKSTART, f"quickstart:{name}")


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    runner = Shell(environment(tmp_path), tmp_path)
    try:
        yield runner
    finally:
        runner.stop()


def test_the_no_api_path_runs_a_thread_that_uses_a_tool(shell: Shell):
    """The fake server, the daemon pointed at it, a scripted tool call and answer, a run:
    the run shows the call, its result and the answer, and exits 0."""
    port = shell.env["TEST_FAKE_PORT"]
    steps = [c.replace(FAKE_PORT, port) for c in commands(block("fake"))]
    assert len(steps) == 4
    *setup, run = steps
    for step in setup:
        done = shell.run(step)
        assert done.returncode == 0, done.stderr
    queued = json.loads(done.stdout)
    assert queued["queued"] == 2
    done = shell.run(run)
    assert done.returncode == 0, done.stderr
    assert "> List the files here." in done.stdout
    assert '⚙ shell {"command": "ls"}' in done.stdout
    # The result line shows the first line of `ls` in the repository: its first file.
    first = subprocess.run(
        ["ls"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    name = re.escape(first.stdout.splitlines()[0])
    assert re.search(rf"✓ shell\(ls\): {name} \(\+\d+ lines\)", done.stdout), done.stdout
    assert "Those are the files here." in done.stdout
    assert "── turn completed" in done.stdout


async def test_the_key_path_works_on_the_first_try(shell: Shell, tmp_path: Path):
    """The key written with ``config set`` reaches the daemon, which then answers the run;
    ``status`` shows the thread. The provider here is the fake, keyed with the page's key."""
    key = re.search(r"config set CONDENSATE_ANTHROPIC_API_KEY (\S+)", block("key"))
    assert key is not None
    async with FakeModelServer(api_key=key[1]) as fake:
        shell.env["CONDENSATE_ANTHROPIC_BASE_URL"] = fake.url
        outputs = []
        for step in [*commands(block("key")), *commands(block("run"))]:
            done = await _in_thread(shell, step)
            assert done.returncode == 0, (step, done.stdout, done.stderr)
            outputs.append(done.stdout)
        assert fake.requests[-1].status == 200
    _, _, run, status, page = outputs
    assert "── turn completed" in run
    assert "idle" in status
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/ui#token=\S+\n", page)


async def _in_thread(shell: Shell, step: str) -> subprocess.CompletedProcess[str]:
    import anyio

    return await anyio.to_thread.run_sync(shell.run, step)


def test_the_no_api_block_pasted_whole_runs_without_waiting_for_its_servers(tmp_path: Path):
    """The fake path's block pasted into bash as one piece, as a person pastes it: nothing
    waits for the fake server or the daemon but what the block itself says (curl retries
    until the fake listens, `run` waits for a daemon still starting), and the run answers."""
    env = environment(tmp_path)
    script = block("fake").replace(FAKE_PORT, env["TEST_FAKE_PORT"])
    out_file, err_file = tmp_path / "pasted.out", tmp_path / "pasted.err"
    with out_file.open("w") as out_log, err_file.open("w") as err_log:
        # Files, not pipes: the servers the block leaves running keep what they inherit open.
        pasted = subprocess.Popen(
            ["bash", "-c", script],
            cwd=REPO,
            env=env,
            stdout=out_log,
            stderr=err_log,
            start_new_session=True,  # its servers are killed with it below
        )
    try:
        pasted.wait(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pasted.pid, signal.SIGTERM)
    out, err = out_file.read_text(), err_file.read_text()
    assert pasted.returncode == 0, (out, err)
    assert '⚙ shell {"command": "ls"}' in out
    assert "Those are the files here." in out
    assert "── turn completed" in out
