"""What a CLI child inherits from the daemon's environment: nothing of Condensate's settings,
no provider's variables or keys, no CLI setting; only its own engine's credential is added."""

from __future__ import annotations

from pathlib import Path

from adapters import _child
from adapters.claude_code import _cli as claude_cli
from adapters.codex import _cli as codex_cli
from condensate.engine import EngineEnv

DAEMON = {
    "PATH": "/usr/bin",
    "HOME": "/home/me",
    "LANG": "C.UTF-8",
    "HTTPS_PROXY": "http://proxy:3128",
    "CONDENSATE_ANTHROPIC_API_KEY": "condensate-anthropic",
    "CONDENSATE_TOKEN_HINT": "x",
    "ANTHROPIC_API_KEY": "daemon-anthropic",
    "ANTHROPIC_AUTH_TOKEN": "daemon-anthropic-token",
    "OPENAI_API_KEY": "daemon-openai",
    "OPENAI_ORG_ID": "org",
    "CLAUDE_CODE_USE_BEDROCK": "1",
    "CODEX_HOME": "/elsewhere",
    "GEMINI_API_KEY": "gemini",
    "GOOGLE_API_KEY": "google",
    "SOMEVENDOR_API_KEY": "vendor",
    "CLAUDECODE": "1",
}
ENV = EngineEnv(
    home=Path("/state"),
    thread_id="t-1",
    anthropic_base_url="http://127.0.0.1:9/anthropic",
    anthropic_api_key="own-anthropic",
    openai_base_url="http://127.0.0.1:9/v1",
    openai_api_key="own-openai",
)
KEPT = {"PATH", "HOME", "LANG", "HTTPS_PROXY"}


def test_the_child_keeps_the_ordinary_environment_and_drops_every_foreign_name():
    """PATH, HOME, locale and proxies pass; Condensate's settings, every provider's
    variables and keys (any *_API_KEY) and the CLIs' own settings do not."""
    child = _child.child_environment({}, DAEMON)
    assert set(child) == KEPT


def test_claude_code_gets_only_the_anthropic_credential_condensate_holds(monkeypatch):
    """The claude child has the daemon's Anthropic key and base URL (not the one the daemon
    inherited), and no other provider's key or Condensate setting."""
    for name, value in DAEMON.items():
        monkeypatch.setenv(name, value)
    child = claude_cli.environment(Path("/state/claude/t-1"), ENV)
    assert child["ANTHROPIC_API_KEY"] == "own-anthropic"
    assert child["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/anthropic"
    assert "ANTHROPIC_AUTH_TOKEN" not in child
    assert not {"OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SOMEVENDOR_API_KEY"} & set(
        child
    )
    assert not [k for k in child if k.startswith("CONDENSATE_")]
    assert "CLAUDE_CODE_USE_BEDROCK" not in child


def test_codex_gets_only_the_openai_credential_under_its_provider_variable(monkeypatch):
    """The codex child has the daemon's OpenAI key as CODEX_PROVIDER_API_KEY and its own
    CODEX_HOME, and no Anthropic or other key, not even OPENAI_API_KEY."""
    for name, value in DAEMON.items():
        monkeypatch.setenv(name, value)
    child = codex_cli.environment(Path("/state/codex/t-1"), ENV)
    assert child[codex_cli.KEY_VARIABLE] == "own-openai"
    assert child["CODEX_HOME"] == "/state/codex/t-1"
    keys = {k for k in child if k.endswith(("_API_KEY", "_TOKEN"))}
    assert keys == {codex_cli.KEY_VARIABLE}
    assert not [k for k in child if k.startswith(("CONDENSATE_", "ANTHROPIC_", "OPENAI_"))]


def test_a_cli_child_gets_the_native_shells_scrub():
    """A CLI child (and so every command its agent runs) loses what the native shell's
    commands lose: tokens, passwords, a URL with a password; the proxies stay."""
    inherited = {
        "PATH": "/bin",
        "GITHUB_TOKEN": "t",
        "PGPASSWORD": "p",
        "DATABASE_URL": "postgresql://me:pw@db/app",
        "HTTPS_PROXY": "http://proxy:3128",
        "PWD": "/work",
    }
    child = _child.child_environment({"OWN": "x"}, inherited)
    assert child == {"PATH": "/bin", "HTTPS_PROXY": "http://proxy:3128", "PWD": "/work", "OWN": "x"}
