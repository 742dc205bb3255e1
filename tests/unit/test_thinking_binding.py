"""The gateway's ledger of a session's signed thinking: which blocks a request it changed may
still carry (platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks:
"A prefix check fails if `system`, `tools`, or an earlier message changed after Claude
produced a block"; removing blocks "from the start of the history, from the end, or all of
them" is valid; "Once you remove a block, leave it out")."""

from __future__ import annotations

from typing import Any

import orjson

from condensate.gateway.binding import (
    Ledger,
    Lost,
    ReplyThinking,
    block_key,
    item_key,
    keep_valid,
    keep_valid_reasoning,
    prefix_digest,
    refused_at,
    without_thinking_from,
)
from condensate.gateway.dialects import dialect


def _count(text: str) -> int:
    return len(text.split())


def _thinking(signature: str, text: str = "") -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature}


def _result(call: str, output: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call, "content": output}],
    }


def _turn(signature: str, call: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            _thinking(signature),
            {"type": "tool_use", "id": call, "name": "Read", "input": {}},
        ],
    }


def _conversation(turns: int) -> dict[str, Any]:
    """A brief, then ``turns`` steps of a thinking turn with a call and its result."""
    messages: list[Any] = [{"role": "user", "content": "brief"}]
    for n in range(1, turns + 1):
        messages += [_turn(f"sig{n}", f"c{n}"), _result(f"c{n}", f"output {n} " * 5)]
    return {"model": "claude-opus-5-5", "system": "S", "tools": [], "messages": messages}


def _receipt(body: dict[str, Any], call: str) -> dict[str, Any]:
    """``body`` with the result of ``call`` replaced, as the gateway does (the other messages
    stay the CLI's own objects)."""
    messages = []
    for message in body["messages"]:
        block = message["content"][0] if isinstance(message["content"], list) else {}
        if block.get("tool_use_id") == call:
            messages.append({**message, "content": [{**block, "content": "[receipt]"}]})
        else:
            messages.append(message)
    return {**body, "messages": messages}


def _signatures(body: dict[str, Any]) -> list[str]:
    return [
        b["signature"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "thinking"
    ]


def test_a_request_the_gateway_left_alone_keeps_every_block():
    """Nothing the gateway changed: every thinking block is the CLI's, valid as the CLI sent it."""
    body = _conversation(3)
    kept = keep_valid(body, body, Ledger(), _count)
    assert _signatures(kept.body) == ["sig1", "sig2", "sig3"]
    assert kept.lost == Lost()


def test_a_change_takes_out_the_thinking_produced_before_it_after_it():
    """A receipt in place of the second result invalidates the thinking after it that the
    gateway did not see produced; the thinking before it stays."""
    body = _conversation(4)
    kept = keep_valid(_receipt(body, "c2"), body, Ledger(), _count)
    assert _signatures(kept.body) == ["sig1", "sig2"]
    assert kept.lost.blocks == 2


def test_thinking_produced_after_a_change_stays_while_the_change_does():
    """A block the gateway saw produced on the changed prefix is kept in the next request that
    carries the same change: "thinking Claude produces afterwards stays valid"."""
    ledger = Ledger()
    body = _conversation(3)
    first = keep_valid(_receipt(body, "c1"), body, ledger, _count)
    ledger.record([block_key(_thinking("sig4")) or ""], first.prefix, output=50)
    later = _conversation(4)
    kept = keep_valid(_receipt(later, "c1"), later, ledger, _count)
    assert _signatures(kept.body) == ["sig1", "sig4"]
    assert kept.lost == Lost()  # sig2 and sig3 were lost once, in the first request


def test_a_block_taken_out_stays_out():
    """Once removed, a block is left out of every later request, even one the gateway does
    not otherwise change: putting it back would break the blocks produced without it."""
    ledger = Ledger()
    body = _conversation(3)
    keep_valid(_receipt(body, "c1"), body, ledger, _count)
    again = _conversation(3)
    kept = keep_valid(again, again, ledger, _count)
    assert _signatures(kept.body) == ["sig1"]
    assert kept.lost == Lost()


def test_a_moved_cache_breakpoint_is_no_change():
    """``cache_control`` is not part of the prefix: a block recorded before the CLI moved its
    breakpoint is still bound to the same prefix."""
    ledger = Ledger()
    body = _conversation(2)
    marked = {
        **body,
        "messages": [
            *body["messages"][:-1],
            {
                "role": "user",
                "content": [
                    {**body["messages"][-1]["content"][0], "cache_control": {"type": "ephemeral"}}
                ],
            },
        ],
    }
    assert prefix_digest(marked) == prefix_digest(body)
    ledger.record([block_key(_thinking("sig3")) or ""], prefix_digest(marked), output=10)
    later = _conversation(3)
    changed = {**later, "messages": list(later["messages"])}  # a new list: "changed" below it
    changed["messages"][0] = {"role": "user", "content": [{"type": "text", "text": "brief"}]}
    kept = keep_valid(changed, later, ledger, _count)
    assert "sig3" in _signatures(kept.body)


def test_a_string_content_and_its_block_form_are_the_same_value():
    """The API reads a string content as one text block: the prefix is the same either way."""
    as_string = {"system": "S", "tools": [], "messages": [{"role": "user", "content": "hi"}]}
    as_block = {
        "system": "S",
        "tools": [],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert prefix_digest(as_string) == prefix_digest(as_block)


def test_a_lost_blocks_tokens_come_from_its_text_or_its_reply():
    """A readable block counts its text; an omitted one seen produced counts its reply's
    output less what its turn shows; one never seen counts nothing."""
    ledger = Ledger()
    body = _conversation(2)
    body["messages"][3]["content"][0] = _thinking("sig2", "one two three")
    ledger.record([block_key(_thinking("sig1")) or ""], b"elsewhere", output=40)
    kept = keep_valid(_receipt(body, "c1"), body, ledger, _count)
    # sig1: bound elsewhere, 40 output less its tool_use's JSON; sig2: its three words
    shown = _count(orjson.dumps(body["messages"][1]["content"][1]).decode())
    assert kept.lost.blocks == 2
    assert kept.lost.tokens == (40 - shown) + 3


def test_the_documented_fix_takes_out_every_block_from_the_refused_one_on():
    """A refusal naming ``messages.3.content.0`` is answered by sending the request again
    without any thinking from that message on; earlier blocks stay, and the removed ones stay
    out of later requests."""
    ledger = Ledger()
    body = _conversation(3)
    at = refused_at(
        "messages.3.content.0: Invalid `signature` in `thinking` block. The block is bound to "
        "a different conversation. Remove the block, or set ..."
    )
    assert at == 3
    kept = without_thinking_from(body, at, ledger, _count)
    assert _signatures(kept.body) == ["sig1"]
    assert kept.lost.blocks == 2
    assert _signatures(keep_valid(body, body, ledger, _count).body) == ["sig1"]


def test_other_refusals_are_not_binding_refusals():
    """A tampered signature or any other 400 is not answered by taking thinking out."""
    assert refused_at("messages.1.content.0: Invalid `signature` in `thinking` block.") is None
    assert refused_at("prompt is too long: 210000 tokens > 200000 maximum") is None


def test_a_streamed_reply_names_its_blocks_and_the_providers_drops():
    """Signatures arrive in ``signature_delta`` pieces (joined per block); a redacted block
    whole at its start; the provider's drops in ``input_transformations`` on message_start."""
    reader = ReplyThinking()
    reader.read_event(
        {
            "type": "message_start",
            "message": {
                "input_transformations": [
                    {
                        "type": "thinking_dropped",
                        "path": "messages.1.content.0",
                        "reason": "prefix_binding_mismatch",
                    },
                    {"type": "something_new", "path": "messages.3.content.0"},
                ]
            },
        }
    )
    reader.read_event(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "ab"},
        }
    )
    reader.read_event(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "cd"},
        }
    )
    reader.read_event(
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "redacted_thinking", "data": "xyz"},
        }
    )
    assert reader.dropped == 1
    wanted = {block_key(_thinking("abcd")), block_key({"type": "redacted_thinking", "data": "xyz"})}
    assert set(reader.all_keys()) == wanted


def _items(steps: int) -> dict[str, Any]:
    """A Responses request: a brief, then ``steps`` of a reasoning item, a call and its output."""
    items: list[Any] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "brief"}]}
    ]
    for n in range(1, steps + 1):
        items += [
            {"type": "reasoning", "id": f"rs{n}", "summary": [], "encrypted_content": f"enc{n}"},
            {
                "type": "function_call",
                "call_id": f"c{n}",
                "name": "exec_command",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": f"c{n}", "output": f"out {n}"},
        ]
    return {"model": "gpt-6.2-sol", "input": items, "tools": []}


def _reasoning(body: dict[str, Any]) -> list[str]:
    return [i["encrypted_content"] for i in body["input"] if i["type"] == "reasoning"]


def test_a_responses_change_takes_out_the_reasoning_after_it():
    """A reasoning item follows "the conversation history that comes before it"
    (developers.openai.com/api/docs/guides/keep-prefix-unchanged): an output replaced by a
    receipt takes out the reasoning after it the gateway did not see produced, keeps the
    reasoning before it, and keeps reasoning produced after the change."""
    ledger = Ledger()
    body = _items(3)
    changed = {**body, "input": list(body["input"])}
    changed["input"][3] = {**changed["input"][3], "output": "[receipt]"}
    kept = keep_valid_reasoning(changed, body, ledger, _count)
    assert _reasoning(kept.body) == ["enc1"]
    assert kept.lost.blocks == 2
    ledger.record([item_key({"encrypted_content": "enc4"}) or ""], kept.prefix, output=30)
    later = _items(4)
    again = {**later, "input": list(later["input"])}
    again["input"][3] = {**again["input"][3], "output": "[receipt]"}
    # enc4 answered the changed request: the same prefix, kept; enc2 and enc3 stay out
    assert _reasoning(keep_valid_reasoning(again, later, ledger, _count).body) == ["enc1", "enc4"]


def test_which_models_bind_their_thinking():
    """The Claude models that run the prefix check, and OpenAI's GPT-5.6 and later; not the
    models before them."""
    assert dialect("anthropic").binds("claude-opus-5-5")
    assert dialect("anthropic").binds("claude-haiku-5-5-20261007")
    assert not dialect("anthropic").binds("claude-sonnet-4-5")
    assert dialect("openai").binds("gpt-6.2-sol")
    assert dialect("openai").binds("gpt-5.6-luna")
    assert not dialect("openai").binds("gpt-5.5")
