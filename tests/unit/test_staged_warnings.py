"""Staged, advisory warnings of an agent-reset thread (``condensate.core.staged_warnings``): the
highest level crossed, once per reset cycle, on the provider's last count (an estimate before
the first), consumed only by a successful request, rearmed by a reset."""

from __future__ import annotations

from condensate.core import reset
from condensate.core.meter import ContextUsage
from condensate.core.staged_warnings import due_warning
from condensate.events import AssistantMessage, ResetPolicy, ToolCall
from condensate.testing.builders import usage
from condensate.testing.threads import ThreadBuilder

POLICY = ResetPolicy(budget=100_000)


def reading(window: int = 200_000, resolved: bool = True) -> ContextUsage:
    return usage(used=0, window=window, resolved=resolved)


def counted(prompt: int) -> ThreadBuilder:
    """A thread whose last successful request the provider counted at ``prompt`` tokens."""
    b = ThreadBuilder(baseline=1_000)
    b.user("brief", 20)
    b.usage(prompt)
    return b


def told(b: ThreadBuilder, policy: ResetPolicy = POLICY) -> float | None:
    """The level due now; it is logged as a successful request would log it."""
    warning = due_warning(b.view, policy, reading(), b.tick())
    if warning is None:
        return None
    b.add(warning, 60)
    return warning.level


def test_below_the_first_level_nothing_is_told() -> None:
    """At 74 % of the budget no warning is due."""
    assert told(counted(74_000)) is None


def test_a_jump_past_several_levels_tells_the_highest_once() -> None:
    """From 74 % to 87 %: one 85 % warning, and at 88 % none more."""
    b = counted(74_000)
    assert told(b) is None
    b.usage(87_000)
    assert told(b) == 0.85
    b.usage(88_000)
    assert told(b) is None
    b.usage(90_000)
    assert told(b) == 0.90


def test_the_warning_says_the_percentage_and_the_budget() -> None:
    """The text names the share, the budget and the tokens, and asks for notes first."""
    warning = due_warning(counted(81_000).view, POLICY, reading(), counted(0).clock)
    assert warning is not None
    assert (warning.level, warning.used, warning.budget) == (0.80, 81_000, 100_000)
    assert "81% of its 100,000-token budget (81,000 tokens)" in warning.text
    assert "condense" in warning.text


def test_a_warning_not_yet_logged_is_due_again() -> None:
    """A request that failed logged nothing: the same warning is due for the next one."""
    b = counted(86_000)
    first = due_warning(b.view, POLICY, reading(), b.tick())
    again = due_warning(b.view, POLICY, reading(), b.tick())
    assert first is not None
    assert again is not None
    assert first.level == again.level == 0.85


def test_a_committed_reset_rearms_every_level() -> None:
    """After a reset the levels are told again, measured on an estimate of the new prompt
    until the provider counts one."""
    b = counted(91_000)
    assert told(b) == 0.90
    call = ToolCall(id="c1", name=reset.TOOL, arguments={})
    boundary = b.seq
    b.add(AssistantMessage(at=b.tick(), tool_calls=(call,)), 20)
    for event in reset.reset_events(call, boundary, b.tick()):
        b.add(event, 30)
    assert b.view.warned_level == 0.0
    assert told(b) is None  # the estimate of the fresh prompt is small
    b.usage(76_000)
    assert told(b) == 0.75


def test_before_any_count_the_assembled_prompt_is_estimated() -> None:
    """With no provider count yet, the baseline and the view are measured."""
    b = ThreadBuilder(baseline=70_000)
    b.user("brief", 6_000)
    assert told(b) == 0.75


def test_no_budget_and_an_unknown_window_tell_no_percentage() -> None:
    """Without a budget the model's window is the budget, if it is known; a fallback window
    is no budget, so nothing is told."""
    b = counted(190_000)
    policy = ResetPolicy()
    assert due_warning(b.view, policy, reading(resolved=False), b.tick()) is None
    known = due_warning(b.view, policy, reading(window=200_000), b.tick())
    assert known is not None
    assert known.level == 0.90
