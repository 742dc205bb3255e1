"""The turn the CLI engines share (``adapters.cli_turn``), driven against a scripted session
and a scripted turn context (``condensate.testing.turns``): no CLI runs.
Each test is one rule of a CLI turn, whatever the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from adapters._asks import AskTeller
from adapters.cli_turn import MAX_SESSIONS_PER_TURN, REFUSED_AGAIN, Exchange, drive
from condensate.engine import INTERRUPTED_BY_OPERATOR, Checkpoint, EngineEnv, TurnContext
from condensate.events import AskOpened, EngineNotice, ModelRefused, now_utc
from condensate.testing.builders import usage, window
from condensate.testing.turns import ScriptedTurn

USAGE = usage()


@dataclass
class Scripted:
    """A CLI whose exchanges are scripted; it writes down what the turn asked of it."""

    exchanges: list[Exchange]
    title: str = "Fake CLI"
    env: EngineEnv = field(default_factory=lambda: EngineEnv(home=Path("/"), thread_id="t"))
    asks: AskTeller = field(default_factory=lambda: AskTeller("fake"))
    window_pending: bool = False
    windowed: bool = True
    fails_on_missed: bool = True
    interrupt_at: int | None = None
    """The operator interrupts during this exchange (1: the first)."""
    sent: list[str] = field(default_factory=list)
    did: list[str] = field(default_factory=list)

    def interrupted(self) -> bool:
        return self.interrupt_at is not None and len(self.sent) >= self.interrupt_at

    def current_session(self) -> str:
        return "s-1"

    def windowing(self) -> bool:
        return self.windowed

    def missed(self, reason: str) -> str | None:
        return f"missed: {reason}" if self.fails_on_missed else None

    def unwindowed_overflow(self) -> str:
        return "overflow without windowing"

    async def check(self, ctx: TurnContext) -> Checkpoint | None:
        return await ctx.checkpoint() if self.windowed else None

    async def opening(self, ctx: TurnContext) -> str:
        self.did.append("opening")
        return "hello"

    async def start_window(self, ctx: TurnContext, *, forced: bool) -> str:
        self.window_pending = False
        self.did.append("window forced" if forced else "window")
        return "the window"

    async def window_after_turn(self, ctx: TurnContext) -> None:
        self.did.append("window after turn")

    async def ready(self, ctx: TurnContext) -> None:
        self.did.append("ready")

    async def exchange(self, ctx: TurnContext, message: str) -> Exchange:
        self.sent.append(message)
        return self.exchanges.pop(0)

    async def settle(self, ctx: TurnContext, exchange: Exchange, why: str) -> None:
        self.did.append(f"settle: {why}")

    async def crashed(self, ctx: TurnContext, exchange: Exchange) -> str:
        self.did.append("crashed")
        return "resume"

    async def after_turn(self, ctx: TurnContext) -> None:
        self.did.append("after turn")


DONE = Exchange(finished=True, text="all done")


async def test_a_turn_sends_its_opening_and_completes_with_the_last_text() -> None:
    """A turn with nothing due sends the opening message once, runs the engine's after-turn
    check, and completes with what the CLI last said."""
    cli, ctx = Scripted([DONE]), ScriptedTurn()
    outcome = await drive(cli, ctx)
    assert (outcome.outcome, outcome.last_text) == ("completed", "all done")
    assert cli.sent == ["hello"]
    assert cli.did == ["opening", "ready", "after turn"]


async def test_a_window_queued_between_turns_opens_the_turn() -> None:
    """A window the turn-start check takes becomes the first message of a new session."""
    cli, ctx = Scripted([DONE]), ScriptedTurn(checks=[Checkpoint(USAGE, window=window())])
    await drive(cli, ctx)
    assert cli.sent == ["the window"]
    assert "opening" not in cli.did


async def test_a_stop_at_the_turns_start_sends_nothing() -> None:
    """A check that says stop at the turn's start ends it stopped before the CLI hears a word."""
    cli, ctx = Scripted([]), ScriptedTurn(checks=[Checkpoint(USAGE, stop="over the limit")])
    outcome = await drive(cli, ctx)
    assert (outcome.outcome, outcome.reason) == ("stopped", "over the limit")
    assert cli.sent == []


@pytest.mark.parametrize(("fails", "expected"), [(True, "failed"), (False, "completed")])
async def test_a_missed_summary_fails_the_turn_only_where_the_engine_says(
    fails: bool, expected: str
) -> None:
    """A due window whose summary did not come ends the turn when the engine says so (Codex),
    and the turn goes on where it does not (Claude Code, whose gateway holds the overflow)."""
    cli = Scripted([DONE], fails_on_missed=fails)
    ctx = ScriptedTurn(checks=[Checkpoint(USAGE, missed="deadline passed")])
    outcome = await drive(cli, ctx)
    assert outcome.outcome == expected
    if fails:
        assert outcome.reason == "missed: deadline passed"


async def test_a_crashed_cli_resumes_once_and_a_second_crash_fails_the_turn() -> None:
    """The first crash resumes the session with the engine's resume message; a second crash
    in the same turn fails it, naming the CLI and its exit."""
    cli = Scripted([Exchange(exited=True, returncode=1), Exchange(exited=True, returncode=9)])
    outcome = await drive(cli, ScriptedTurn())
    assert cli.sent == ["hello", "resume"]
    assert outcome.outcome == "failed"
    assert outcome.reason == "the Fake CLI process exited twice in one turn (last exit 9)"
    assert cli.did.count("crashed") == 2


async def test_a_crash_with_a_window_due_starts_the_windows_session() -> None:
    """A CLI that dies while a window is due starts the window's session, not a resume."""
    cli = Scripted([Exchange(exited=True, returncode=1, window=True), DONE])
    outcome = await drive(cli, ScriptedTurn())
    assert cli.sent == ["hello", "the window"]
    assert outcome.outcome == "completed"


async def test_an_overflow_forces_one_window_and_a_second_fails_the_turn() -> None:
    """A prompt refused as too long is logged, forces a window (the session starts over with
    it), and a second refusal in the same turn fails it."""
    too_long = Exchange(overflow="prompt is too long: 210000 tokens")
    cli, ctx = Scripted([too_long, too_long]), ScriptedTurn()
    outcome = await drive(cli, ctx)
    assert cli.sent == ["hello", "the window"]
    assert "window forced" in cli.did
    assert (outcome.outcome, outcome.reason) == ("failed", REFUSED_AGAIN)
    refusals = ctx.of_kind(ModelRefused)
    assert [r.message for r in refusals] == ["prompt is too long: 210000 tokens"] * 2


async def test_an_overflow_without_windowing_fails_with_the_engines_reason() -> None:
    """Where Condensate does not window (the CLI compacts on its own), an overflow fails the
    turn with the engine's sentence, and no window is forced."""
    cli = Scripted([Exchange(overflow="too long")], windowed=False)
    outcome = await drive(cli, ScriptedTurn())
    assert (outcome.outcome, outcome.reason) == ("failed", "overflow without windowing")
    assert "window forced" not in cli.did


async def test_a_window_due_mid_turn_goes_on_in_a_new_session() -> None:
    """A window the CLI's own checks found ends the exchange; the turn goes on in a session
    that starts with it."""
    cli = Scripted([Exchange(window=True), DONE])
    outcome = await drive(cli, ScriptedTurn())
    assert cli.sent == ["hello", "the window"]
    assert outcome.outcome == "completed"


async def test_a_window_due_after_the_cli_finished_waits_for_the_next_turn() -> None:
    """When the CLI ended its turn by itself before a due window could act, the turn is done
    and the window is left for the next one."""
    cli = Scripted([Exchange(window=True, finished=True, text="done")])
    outcome = await drive(cli, ScriptedTurn())
    assert (outcome.outcome, outcome.last_text) == ("completed", "done")
    assert cli.sent == ["hello"]
    assert cli.did[-1] == "window after turn"


async def test_a_refused_credential_fails_the_turn_and_says_so_in_the_log() -> None:
    """A refused credential ends the turn failed with its reason, what the CLI left open is
    closed, and an authentication-failed line names it."""
    cli, ctx = Scripted([Exchange(credential="the key was refused (401)")]), ScriptedTurn()
    outcome = await drive(cli, ctx)
    assert (outcome.outcome, outcome.reason) == ("failed", "the key was refused (401)")
    assert ctx.lines() == ["authentication-failed"]
    assert "settle: the provider refused the credential" in cli.did


async def test_the_operators_interrupt_ends_the_turn_interrupted() -> None:
    """An interrupt during an exchange ends the turn interrupted, whatever the CLI replied,
    and lets the engine close what the CLI left open."""
    cli = Scripted([Exchange(window=True)], interrupt_at=1)
    outcome = await drive(cli, ScriptedTurn())
    assert (outcome.outcome, outcome.reason) == ("interrupted", INTERRUPTED_BY_OPERATOR)
    assert "settle: the operator interrupted the turn" in cli.did
    assert "window" not in cli.did


async def test_an_error_ending_fails_the_turn_with_an_engine_error_line() -> None:
    """The CLI ending its turn with an error fails the turn with that error, logged."""
    cli, ctx = Scripted([Exchange(error="Fake CLI ended the turn failed: boom")]), ScriptedTurn()
    outcome = await drive(cli, ctx)
    assert (outcome.outcome, outcome.reason) == ("failed", "Fake CLI ended the turn failed: boom")
    assert ctx.lines() == ["engine-error"]


async def test_an_ask_opened_during_the_turn_is_told_in_a_follow_up() -> None:
    """An ask that opened while the CLI worked is told to the head in one more message, noted
    in the log, and the turn completes after it."""
    ctx = ScriptedTurn()
    deadline = now_utc() + timedelta(minutes=5)
    ask = AskOpened(at=now_utc(), ask_id="ask-1", deadline=deadline, used=90_000, line=80_000)

    class AskingCli(Scripted):
        async def exchange(self, ctx: TurnContext, message: str) -> Exchange:
            ctx.view.ask = ask  # the runtime opened the ask meanwhile
            return await super().exchange(ctx, message)

    cli = AskingCli([DONE, DONE])
    outcome = await drive(cli, ctx)
    assert outcome.outcome == "completed"
    assert len(cli.sent) == 2
    assert "compact your context" not in cli.sent[0]
    assert "it is at 90000 of your 80000-token line" in cli.sent[1]
    told = ctx.of_kind(EngineNotice)
    assert [e.notice for e in told] == ["ask-delivered"]


async def test_a_turn_starts_at_most_a_dozen_sessions() -> None:
    """A turn whose every exchange asks for a new window ends failed after
    ``MAX_SESSIONS_PER_TURN`` sessions, naming the CLI."""
    cli = Scripted([Exchange(window=True) for _ in range(MAX_SESSIONS_PER_TURN)])
    outcome = await drive(cli, ScriptedTurn())
    assert outcome.outcome == "failed"
    assert outcome.reason == f"{MAX_SESSIONS_PER_TURN} Fake CLI sessions started in one turn"
    assert len(cli.sent) == MAX_SESSIONS_PER_TURN
