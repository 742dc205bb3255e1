"""A request's size bounded from its bytes: the span that changed since the last counted
request, found exactly; a bound that never falls under the provider's count; and no bound
where the bytes cannot say (opaque content, a model that is not the first key)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from condensate.core.tokens import counter_for
from condensate.gateway import bound
from condensate.gateway.bound import changed, leading_model, shared_prefix, shared_suffix
from condensate.gateway.dialects import anthropic
from condensate.gateway.wire import SessionMeter


def naive_prefix(old: bytes, new: bytes) -> int:
    shared = 0
    for a, b in zip(old, new, strict=False):
        if a != b:
            break
        shared += 1
    return shared


def naive_suffix(old: bytes, new: bytes, most: int) -> int:
    return min(naive_prefix(old[::-1], new[::-1]), most)


chunks = st.binary(max_size=300)


@given(chunks, chunks, chunks, chunks)
def test_the_shared_prefix_and_suffix_are_found_exactly(head, old_mid, new_mid, tail):
    """However two requests part, the prefix and suffix found are the longest shared ones."""
    old, new = head + old_mid + tail, head + new_mid + tail
    prefix = shared_prefix(old, new)
    assert prefix == naive_prefix(old, new)
    most = min(len(old), len(new)) - prefix
    assert shared_suffix(old, new, most) == naive_suffix(old, new, most)


def test_requests_that_part_past_a_block_are_compared_exactly(monkeypatch):
    """Long requests are compared a block at a time; where they part inside a later block
    is still found to the byte."""
    monkeypatch.setattr(bound, "BLOCK", 64)
    old = bytes(range(256)) * 40
    new = old[:7_001] + b"new tool result" + old[7_001 + 5 :]
    start, end = changed(old, new)
    assert (start, end) == (7_001, 7_001 + len(b"new tool result"))


def test_an_identical_request_changes_nothing():
    body = b'{"model":"m","messages":[]}'
    assert changed(body, body) == (len(body), len(body))


def test_the_bound_is_the_last_count_plus_the_changed_bytes_and_slack():
    old = b'{"model":"m","messages":[1]}'
    new = b'{"model":"m","messages":[1,22]}'
    assert bound.bound(old, 1_000, new) == 1_000 + len(b",22") + bound.SLACK


def test_an_image_or_a_file_in_the_change_gives_no_bound():
    """Opaque content is counted otherwise than by its bytes: no bound, the request is
    parsed and measured before it goes on."""
    old = b'{"model":"m","messages":[]}'
    for added in (b'{"type":"image","source":{}}', b'{"type":"input_file","file_id":"f"}'):
        new = old[:-2] + added + b"]}"
        assert bound.bound(old, 10, new) is None


def test_an_image_outside_the_change_still_allows_a_bound():
    old = b'{"model":"m","messages":[{"type":"image"}]}'
    new = old[:-2] + b',"more text"]}'
    assert bound.bound(old, 10, new) == 10 + len(b',"more text"') + bound.SLACK


def test_the_model_is_read_only_when_it_is_the_first_key():
    assert leading_model(b'{"model":"claude-sonnet-4-5","messages":[]}') == "claude-sonnet-4-5"
    assert leading_model(b'{ "model" : "gpt-5.5", "input": []}') == "gpt-5.5"
    assert leading_model(b'{"messages":[],"model":"claude-sonnet-4-5"}') is None
    assert leading_model(b'{"model":"a\\"b"}') is None


def claude_request(results: list[str]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Count the lines."}]
    for i, text in enumerate(results):
        call = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"n": i}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": text}
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return {
        "model": "claude-sonnet-4-5",
        "messages": messages,
        "system": "Be brief.",
        "stream": True,
    }


texts = st.text(max_size=400)


@settings(deadline=None)  # the first example loads the tokenizer
@given(st.lists(texts, min_size=1, max_size=4), st.lists(texts, min_size=1, max_size=3))
def test_the_bound_is_never_under_the_count_of_what_was_added(before, added):
    """A session's next request adds tool results: the bound from the bytes is at least the
    last count plus the local count of everything added (tokens are never fewer bytes)."""
    meter = SessionMeter(counter_for("claude-sonnet-4-5"))
    first = claude_request(before)
    body = json.dumps(first, ensure_ascii=False).encode()
    size, sent = meter.measure(anthropic.shape(first))
    meter.answered(sent, size, body)

    second = claude_request(before + added)
    later = json.dumps(second, ensure_ascii=False).encode()
    counted, _ = meter.measure(anthropic.shape(second))
    ceiling = meter.bound(later)
    assert ceiling is not None
    assert ceiling >= counted


def test_a_request_not_from_the_cli_gives_no_bound():
    """``answered`` without the CLI's own bytes (receipts replaced something): no bound."""
    meter = SessionMeter(counter_for("claude-sonnet-4-5"))
    request = claude_request(["a"])
    size, sent = meter.measure(anthropic.shape(request))
    meter.answered(sent, size)
    assert meter.bound(json.dumps(request).encode()) is None
