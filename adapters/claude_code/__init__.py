"""The Claude Code engine (``claude``): drives the real ``claude`` CLI as a long-lived child.

One process per Claude session: ``claude -p --input-format stream-json --output-format
stream-json --verbose``, its state in ``$CONDENSATE_HOME/claude/<thread>`` (CLAUDE_CONFIG_DIR)
and its own auto-compaction off, so that a provider's "prompt is too long" reaches us as a
``result`` with ``terminal_reason: "prompt_too_long"`` instead of being compacted away.

A turn sends the human messages logged since the last turn as one user line and reads lines
until the turn's ``result``. A turn the CLI runs by itself when a background subagent finishes
(its ``result`` has ``origin.kind: "task-notification"``), perhaps between our turns, is logged
but does not end the turn being read. Every top-level line becomes log events: one
``model.usage`` per API call (deduplicated by message id, appended before its reply as the
native loop does), the reply as ``message.assistant``, each ``tool_result`` as
``tool.result``, and the session's lineage as ``engine.notice``. Subagent lines
(``parent_tool_use_id`` set) keep their own context: they are neither logged as top-level
events nor checked.

The checkpoint runs after each top-level tool result. A window interrupts the turn, ends the
process, and starts a new Claude session whose first message is the rendered window: a fork of
the root session at its first safe point (its first assistant text) when there is one and the
window was not forced, else a fresh session. A crash mid-turn resumes the same session once.

A head gets Condensate's MCP server (``condensate.engine.mcp``: ``compact_context``,
``compact_microcompact``, ``context_usage``) through ``--mcp-config --strict-mcp-config``. An ask
is told to the head in the next user line the engine writes (a follow-up after the turn's
result when it opened mid-turn); its answer is taken at the next checkpoint or turn start. A
window taken while the engine is idle (an ask's deadline) restarts the session at once.

``_cli`` owns the binary and the process, ``_translate`` the lines-to-events translation,
``_reading`` following one turn's lines, and ``engine`` the turns, checkpoints and sessions.
"""

from __future__ import annotations

from adapters.claude_code._cli import (
    PINNED_VERSION,
    STATE_DIR,
    ClaudeSettings,
    check_version,
    cli_model,
    doctor,
    launch,
    resolve_binary,
)
from adapters.claude_code._permissions import check, flags
from adapters.claude_code._translate import _output
from adapters.claude_code.engine import ClaudeCodeEngine
from condensate.engine import EngineInfo

ENGINE = EngineInfo(
    name="claude",
    title="Claude Code",
    make=ClaudeCodeEngine,
    checkpoints="after-tool-results",
    ceiling_share=0.75,
    ceiling_cap=200_000,
    heads="asked",
    restarts=True,
    recall=True,
    own_context=("<system-reminder>",),
    compaction_opens=("CRITICAL: Respond with TEXT ONLY",),
    announces_retries=True,
    gateway_api="anthropic",
    session_header="x-claude-code-session-id",
    providers=("anthropic",),
    settings=ClaudeSettings,
    thread_dirs=STATE_DIR,
    check=doctor,
    launch=launch,
    cli_model=cli_model,
)

__all__ = [
    "ENGINE",
    "PINNED_VERSION",
    "ClaudeCodeEngine",
    "ClaudeSettings",
    "_output",
    "check",
    "check_version",
    "flags",
    "resolve_binary",
]
