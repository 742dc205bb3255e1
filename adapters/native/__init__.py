"""The native engine (``api``): Condensate's own agent loop over the provider clients, its
window check before every model call. ``engine`` holds the loop; ``tools`` the tools it runs
(``files``, ``shell``), ``permissions`` what a thread's permissions let them touch, and
``output`` how a long output is capped."""

from __future__ import annotations

from pydantic import Field

from adapters.native.engine import NativeEngine, tool_specs
from condensate.engine import EngineInfo, EngineSettings


class NativeSettings(EngineSettings):
    window_ceiling_pi: int | None = Field(default=None, gt=0)
    """``CONDENSATE_WINDOW_CEILING_PI``: the operator's cap on the native loop's ceiling (the
    same variable caps Codex's)."""

    def ceiling_cap(self) -> int | None:
        return self.window_ceiling_pi


ENGINE = EngineInfo(
    name="api",
    title="the native loop",
    make=NativeEngine,
    checkpoints="before-each-call",
    ceiling_share=0.40,
    ceiling_cap=120_000,
    heads="cut",
    restarts=False,
    default=True,
    recall=True,
    settings=NativeSettings,
)

__all__ = ["ENGINE", "NativeEngine", "NativeSettings", "tool_specs"]
