"""Engine adapters: the native loop, Claude Code and Codex. They may import ``condensate``;
the core never imports them (only ``condensate.app``, the composition root, does)."""

from __future__ import annotations

from adapters.claude_code import ClaudeCodeEngine
from adapters.codex import CodexEngine
from adapters.native import NativeEngine
from condensate.engine import Engines

ENGINES: Engines = {
    NativeEngine.name: NativeEngine,
    ClaudeCodeEngine.name: ClaudeCodeEngine,
    CodexEngine.name: CodexEngine,
}
