"""How a CLI engine tells its head of a pending ask: once per ask, added to the next input it
sends the agent, with an ``ask-delivered`` notice in the log."""

from __future__ import annotations

from dataclasses import dataclass

from adapters._texts import ask_note
from condensate.engine import TurnContext
from condensate.events import Engine, EngineNotice


@dataclass
class AskTeller:
    """The last ask the head was told of."""

    engine: Engine
    told: str | None = None

    def untold(self, ctx: TurnContext) -> bool:
        """An ask is pending that the head has not heard of."""
        ask = ctx.view.ask
        return ask is not None and ask.ask_id != self.told

    async def tell(
        self, ctx: TurnContext, message: str, *, fallback: str, where: str, session_id: str
    ) -> str:
        """``message`` with the pending ask added the first time the head hears of it (noted
        in the log as told ``where``); ``fallback`` when there is neither."""
        ask = ctx.view.ask
        if ask is None or ask.ask_id == self.told:
            return message or fallback
        self.told = ask.ask_id
        await ctx.append(
            EngineNotice(
                at=ctx.now(),
                engine=self.engine,
                notice="ask-delivered",
                detail=f"{ask.ask_id} told to the head in {where}",
                seat="main",
                session_id=session_id or None,
            )
        )
        note = ask_note(ask)
        return f"{message}\n\n{note}" if message else note
