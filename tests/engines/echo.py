"""A test engine: it answers each turn with the human messages it has not answered yet, each
behind its own setting's prefix, and checks for a window before each answer as a loop that
projects every call would. Nothing of it is named anywhere in ``condensate``; it reaches the
daemon through an entry point (``condensate.engines``) alone. ``ASKING`` is the same engine
with its heads asked to compact, as the CLI engines' are: a head over its line opens an ask
that waits for an operator.
"""

from __future__ import annotations

from dataclasses import replace

from condensate.core.projector import Projection
from condensate.core.queries import human_since
from condensate.engine import (
    EngineEnv,
    EngineInfo,
    EngineSettings,
    ThreadSpec,
    TurnContext,
    TurnOutcome,
    own_settings,
)
from condensate.events import AssistantMessage, Window

BASELINE_TOKENS = 321


class EchoSettings(EngineSettings):
    echo_prefix: str = "echo"
    """``CONDENSATE_ECHO_PREFIX``: what each answer starts with."""
    window_ceiling_echo: int | None = None
    """``CONDENSATE_WINDOW_CEILING_ECHO``: the operator's cap on its ceiling."""

    def ceiling_cap(self) -> int | None:
        return self.window_ceiling_echo


class EchoEngine:
    def __init__(self, spec: ThreadSpec, env: EngineEnv) -> None:
        self.settings = own_settings(EchoSettings, env.settings)

    def baseline(self, spec: ThreadSpec) -> int:
        return BASELINE_TOKENS

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome:
        check = await ctx.checkpoint()
        if check.stop is not None:
            return TurnOutcome("stopped", check.stop)
        texts = human_since(ctx.view, _last_answer(ctx.view))
        answer = "\n".join(f"{self.settings.echo_prefix}: {text}" for text in texts)
        await ctx.append(AssistantMessage(at=ctx.now(), text=answer))
        return TurnOutcome("completed", "", answer)

    async def apply_window(self, window: Window) -> None:
        return None  # every answer reads the view as it stands

    async def close(self) -> None:
        return None


def _last_answer(view: Projection) -> int:
    """The seq of the engine's last answer (0: none): the log, not the engine, remembers."""
    for entry in reversed(view.entries):
        if isinstance(entry.event, AssistantMessage):
            return entry.seq
    return 0


def doctor(settings: EngineSettings) -> str:
    assert isinstance(settings, EchoSettings)
    return f"echo ready (prefix {settings.echo_prefix!r})"


ENGINE = EngineInfo(
    name="echo",
    title="Echo",
    make=EchoEngine,
    checkpoints="before-each-call",
    ceiling_share=0.30,
    ceiling_cap=50_000,
    heads="cut",
    settings=EchoSettings,
    check=doctor,
)

ASKING = replace(ENGINE, name="echo-asks", title="Echo (heads asked)", heads="asked")
