"""The engine contract (``condensate.testing.engines``), passed by the native loop (``api``)
in a real daemon on the fake model server's Messages API, its shell the ``shell`` tool."""

from __future__ import annotations

from typing import Any, ClassVar

from condensate.testing.engines import ModelEngineContract, uncached
from condensate.testing.fake_model import Call, RecordedRequest, Reply, ToolCalls

MODEL = "claude-sonnet-4-5"
CEILING = 20_000
"""Under the operator's cap (``CONDENSATE_WINDOW_CEILING_PI``), not 40 % of the window."""


class TestNativeEngine(ModelEngineContract):
    engine = "api"
    model = f"anthropic:{MODEL}"
    ceiling = CEILING
    settings: ClassVar[dict[str, str]] = {"CONDENSATE_WINDOW_CEILING_PI": str(CEILING)}
    endpoint = "messages"
    steps_past_line = 10

    def bare_model(self) -> str:
        return MODEL

    def command(self, command: str, text: str = "") -> Reply:
        return ToolCalls([Call("shell", {"command": command})], text=text)

    def conversation(self, request: RecordedRequest) -> list[Any]:
        return list(uncached(request.body["messages"]))
