"""The pinned CLIs alone (no Condensate) against the fake model server: the fake keeps the
vendors' rules without being stricter than the APIs the CLIs were built for. Claude Code on
Claude Opus 5.5 with thinking passes every preserved-thinking check and reads the cache through
its own breakpoints; Codex reads OpenAI's automatic cache."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

import pytest

from condensate.testing.fake_model import (
    Call,
    FakeModelServer,
    RecordedRequest,
    Text,
    ToolCalls,
)
from tests.e2e.conftest import CLAUDE, CODEX

CLAUDE_MODEL = "claude-opus-5-5"
CODEX_MODEL = "gpt-5.5"
STEPS = 3
FOREIGN = ("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "CONDENSATE_")


@dataclass(frozen=True)
class Run:
    """One CLI run: its exit, its output and every request the fake had."""

    returncode: int
    output: str
    requests: list[RecordedRequest]


def environment(**own: str) -> dict[str, str]:
    """This process's environment without any provider's or CLI's settings, plus ``own``."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)}
    return {**kept, **own}


@pytest.fixture(scope="module")
def claude_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """``claude -p`` on Claude Opus 5.5 (thinking on, as the CLI sends it) through three
    tool-using turns and an answer."""
    home = tmp_path_factory.mktemp("claude")
    with FakeModelServer.in_thread(window=None) as fake:
        steps = [
            ToolCalls([Call("Bash", {"command": f"echo step {i}"})], text=f"Step {i}.")
            for i in range(STEPS)
        ]
        fake.queue(*steps, Text("All three steps ran."), model=CLAUDE_MODEL)
        env = environment(
            CLAUDE_CONFIG_DIR=str(home / "config"),
            ANTHROPIC_BASE_URL=fake.url,
            ANTHROPIC_API_KEY="fake",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            IS_SANDBOX="1",
        )
        command = [str(CLAUDE), "-p", "Run the three echo steps.", "--model", CLAUDE_MODEL]
        command += ["--output-format", "json", "--permission-mode", "bypassPermissions"]
        done = subprocess.run(
            command, cwd=home, env=env, capture_output=True, text=True, timeout=180, check=False
        )
        yield Run(done.returncode, done.stdout + done.stderr, fake.requests)


@pytest.fixture(scope="module")
def codex_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """``codex exec`` on gpt-5.5 through three tool-using turns and an answer."""
    home = tmp_path_factory.mktemp("codex")
    work = home / "work"
    work.mkdir()
    with FakeModelServer.in_thread(window=None) as fake:
        steps = [ToolCalls([Call("exec_command", {"cmd": f"echo step {i}"})]) for i in range(STEPS)]
        fake.queue(*steps, Text("All three steps ran."), model=CODEX_MODEL)
        config = "\n".join(
            [
                f'model = "{CODEX_MODEL}"',
                'model_provider = "fake"',
                'approval_policy = "never"',
                'sandbox_mode = "danger-full-access"',
                "check_for_update_on_startup = false",
                "[model_providers.fake]",
                'name = "fake"',
                f'base_url = "{fake.url}/v1"',
                'env_key = "FAKE_KEY"',
                'wire_api = "responses"',
                "[analytics]",
                "enabled = false",
            ]
        )
        (home / "config.toml").write_text(config + "\n")
        env = environment(CODEX_HOME=str(home), FAKE_KEY="fake")
        command = [str(CODEX), "exec", "--skip-git-repo-check", "Run the three echo steps."]
        done = subprocess.run(
            command,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        yield Run(done.returncode, done.stdout + done.stderr, fake.requests)


def turns(run: Run, model: str) -> list[RecordedRequest]:
    return [r for r in run.requests if r.model == model and r.endpoint in ("messages", "responses")]


def test_claude_code_alone_is_never_refused_for_its_thinking(claude_run: Run) -> None:
    """Claude Code sends every assistant turn back as received, so no request fails the
    preserved-thinking check: "Send each assistant turn back exactly as the API returned it
    ... including `thinking` blocks whose `thinking` field is empty" (https://
    platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting). Each request
    carries one more signed block than the one before."""
    sent = turns(claude_run, CLAUDE_MODEL)
    assert claude_run.returncode == 0, claude_run.output
    assert "All three steps ran." in claude_run.output
    assert len(sent) == STEPS + 1
    assert all(r.status == 200 for r in sent)
    assert all(r.body["thinking"]["type"] in ("enabled", "adaptive") for r in sent)
    outcomes = [r.thinking for r in sent]
    assert all(o is not None and not o.refused and not o.dropped for o in outcomes)
    assert [o.checked for o in outcomes if o is not None] == list(range(STEPS + 1))


def test_claude_code_alone_reads_its_own_breakpoints(claude_run: Run) -> None:
    """Claude Code places its own ``cache_control`` breakpoints, so each later turn reads the
    one before from the cache ("a hit is looked for at each breakpoint and ... up to 20 blocks
    before it", https://platform.claude.com/docs/en/build-with-claude/prompt-caching,
    capture)."""
    sent = turns(claude_run, CLAUDE_MODEL)
    assert claude_run.returncode == 0, claude_run.output
    assert sent[0].cache_write > 0
    assert all(later.cache_read == earlier.input_tokens for earlier, later in pairwise(sent))


def test_codex_alone_reads_the_automatic_cache(codex_run: Run) -> None:
    """Codex's prompt (its instructions alone pass 1,024 tokens) is cached automatically and
    each later turn reads the one before: "caching is enabled automatically for prompts that
    are 1024 tokens or longer" (https://developers.openai.com/api/docs/guides/prompt-caching).
    """
    sent = turns(codex_run, CODEX_MODEL)
    assert codex_run.returncode == 0, codex_run.output
    assert len(sent) == STEPS + 1
    assert all(r.status == 200 for r in sent)
    assert sent[0].cache_read == 0
    assert all(later.cache_read == earlier.input_tokens for earlier, later in pairwise(sent))
