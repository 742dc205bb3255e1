"""The Codex engine (``codex``): drives the real ``codex app-server`` as a long-lived child.

One app-server per thread, its state in ``$CONDENSATE_HOME/codex/<thread>`` (``CODEX_HOME``)
with a generated ``config.toml``: the daemon's OpenAI endpoint as the provider, approvals off
(each Codex thread of an ``ask`` thread asks, and the operator answers), the sandbox from the
thread's permissions (for the confined values a permission profile that also confines reads),
plugin sync and analytics off, and a model catalog
whose window is out of reach, so that Codex never compacts on its own and an overflow reaches
us as a ``contextWindowExceeded`` error instead. ``CONDENSATE_CODEX_WINDOWING=0`` leaves the
catalog out and the check off: Codex compacts as it would alone, and Condensate records it.

A turn is a ``turn/start`` with the human messages logged since the last one; its
notifications become log events: one ``model.usage`` per counted response (``last``; the
synthetic "window full" count after an overflow is ignored) before the reply and its calls,
each command, patch and MCP call with its result, refusals as ``model.refused``, Codex's thread
ids as ``engine.notice`` lineage, and a ``contextCompaction`` item as a notice that also drops
an open ask.

The check runs after each counted response once no command is running, and after the turn.
A window interrupts the turn and starts a fresh Codex thread (same persona, permissions and
sandbox) with the rendered window injected as one historical user message; the turn goes on
there. A refusal forces a window; a summary the curator cannot write fails the send. Heads
get Condensate's MCP server in the config and are asked, as on Claude Code.

``_cli`` owns the binary and the generated ``CODEX_HOME``, ``_rpc`` the JSON-RPC peer,
``_translate`` the items-to-events translation, ``_reading`` following one turn's
notifications, and ``engine`` the turns and threads.
"""

from __future__ import annotations

from adapters.codex._cli import (
    PINNED_VERSION,
    STATE_DIR,
    CodexSettings,
    check_version,
    cli_model,
    doctor,
    launch,
    resolve_binary,
    sandbox_mode,
)
from adapters.codex.engine import CodexEngine
from condensate.engine import EngineInfo

ENGINE = EngineInfo(
    name="codex",
    title="Codex",
    make=CodexEngine,
    checkpoints="after-each-response",
    ceiling_share=0.40,
    ceiling_cap=120_000,
    heads="asked",
    restarts=True,
    recall=True,
    own_context=("<environment_context>", "<user_instructions>", "# AGENTS.md instructions"),
    gateway_api="openai",
    session_header="thread-id",
    providers=("openai",),
    settings=CodexSettings,
    thread_dirs=STATE_DIR,
    check=doctor,
    launch=launch,
    cli_model=cli_model,
)

__all__ = [
    "ENGINE",
    "PINNED_VERSION",
    "CodexEngine",
    "CodexSettings",
    "check_version",
    "resolve_binary",
    "sandbox_mode",
]
