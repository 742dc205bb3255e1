"""Engine adapters: the native loop, Claude Code and Codex. They may import ``condensate``;
the core never imports them (only ``condensate.app``, the composition root, does)."""

from __future__ import annotations

from adapters.claude_code import ClaudeCodeEngine
from adapters.claude_code import _cli as claude_cli
from adapters.codex import CodexEngine
from adapters.codex import _cli as codex_cli
from adapters.native import NativeEngine
from condensate.engine import Engines
from condensate.errors import ConfigError

ENGINES: Engines = {
    NativeEngine.name: NativeEngine,
    ClaudeCodeEngine.name: ClaudeCodeEngine,
    CodexEngine.name: CodexEngine,
}


def check_clis(claude_binary: str | None, codex_binary: str | None) -> dict[str, str]:
    """Each CLI engine's version and binary, or why it cannot run (for ``doctor``)."""
    found: dict[str, str] = {}
    for name, resolve, check, configured in (
        ("claude", claude_cli.resolve_binary, claude_cli.check_version, claude_binary),
        ("codex", codex_cli.resolve_binary, codex_cli.check_version, codex_binary),
    ):
        try:
            binary = resolve(configured)
            found[name] = f"{check(binary)} ({binary})"
        except ConfigError as exc:
            found[name] = f"unavailable: {exc}"
    return found
