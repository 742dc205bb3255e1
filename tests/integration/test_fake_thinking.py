"""Preserved thinking on the fake model server, over loopback HTTP: signed thinking blocks, the
prefix and chain checks, ``drop_block``, model binding and the cost of lost thinking. The rules
are the vendor's (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking and
its pages ``prefix-checks`` and ``fix-bound-to-a-different-conversation``), read through the
project's research digest; the fake behaves as an account created after 2026-08-31."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.fake_api import events, post, user

OVERVIEW = "https://platform.claude.com/docs/en/build-with-claude/preserved-thinking"
PREFIX_CHECKS = f"{OVERVIEW}/prefix-checks"
MODEL = "claude-opus-5-5"
SYSTEM = [{"type": "text", "text": "You are a careful coding agent."}]
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]
BETA = "thinking-binding-controls-2026-08-01"
DROP = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
BOUND = (
    "Invalid `signature` in `thinking` block. The block is bound to a different conversation. "
    'Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
)
NO_HEADER = (
    " That setting requires the `thinking-binding-controls-2026-08-01` value in the "
    "`anthropic-beta` header."
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=None) as server:
        yield server


def request(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body = {
        "model": MODEL,
        "max_tokens": 4096,
        "system": SYSTEM,
        "tools": TOOLS,
        "thinking": {"type": "adaptive"},
        "messages": messages,
    }
    return {**body, **extra}


async def send(
    session: aiohttp.ClientSession,
    fake: FakeModelServer,
    body: dict[str, Any],
    **headers: str,
) -> tuple[int, Any]:
    status, reply, _ = await post(session, f"{fake.url}/v1/messages", body, **headers)
    return status, reply


async def converse(
    session: aiohttp.ClientSession, fake: FakeModelServer, turns: int, **extra: Any
) -> list[dict[str, Any]]:
    """``turns`` tool-using turns, each reply sent back as received; the history ends with
    the last tool result, ready for the next request."""
    messages = [user("Count the files.")]
    for n in range(turns):
        fake.queue(ToolCalls([Call("Bash", {"command": f"ls {n}"})]))
        status, reply = await send(session, fake, request(messages, **extra))
        assert status == 200, reply
        call = reply["content"][-1]
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": f"{n} files"}
        messages += [
            {"role": "assistant", "content": reply["content"]},
            {"role": "user", "content": [result]},
        ]
    return messages


def without_thinking(messages: list[dict[str, Any]], *indexes: int) -> list[dict[str, Any]]:
    """``messages`` with the thinking blocks of the messages at ``indexes`` removed."""
    edited = copy.deepcopy(messages)
    for i in indexes:
        edited[i]["content"] = [b for b in edited[i]["content"] if b["type"] != "thinking"]
    return edited


async def test_a_conversation_sent_back_as_received_passes(fake, session):
    """Five tool-using turns, each assistant turn sent back exactly as received, are never
    refused: "Send each assistant turn back exactly as the API returned it ... including
    `thinking` blocks whose `thinking` field is empty" (https://platform.claude.com/docs/en/
    build-with-claude/thinking-troubleshooting)."""
    messages = await converse(session, fake, 5)
    fake.queue(Text("Done."))
    status, _ = await send(session, fake, request(messages))
    assert status == 200
    assert all(r.status == 200 for r in fake.requests)
    assert [r.thinking.checked for r in fake.requests if r.thinking] == [0, 1, 2, 3, 4, 5]
    assert not any(r.thinking.refused or r.thinking.dropped for r in fake.requests if r.thinking)


async def test_a_reply_with_thinking_on_starts_with_a_signed_empty_block(fake, session):
    """With thinking on, every reply of a checking model starts with a thinking block whose
    text is empty and whose signature is set: "their `thinking` field is an empty string and
    only the `signature` field is populated. This happens because `display` defaults to
    "omitted" on newer models" (https://platform.claude.com/docs/en/build-with-claude/
    thinking-troubleshooting). Its tokens are billed as output all the same."""
    fake.queue(Text("Hi."))
    _, reply = await send(session, fake, request([user("hi")]))
    first = reply["content"][0]
    assert first["type"] == "thinking"
    assert first["thinking"] == ""
    assert first["signature"].startswith("fakesig")
    assert reply["usage"]["output_tokens"] > 150


async def test_display_summarized_sends_the_thinking_text(fake, session):
    """``thinking.display`` other than "omitted" sends the text: the scripted thinking here."""
    fake.queue(Text("Hi.", thinking="Greet them back."))
    body = request([user("hi")], thinking={"type": "adaptive", "display": "summarized"})
    _, reply = await send(session, fake, body)
    assert reply["content"][0]["thinking"] == "Greet them back."


async def test_no_thinking_block_without_thinking(fake, session):
    """A request that does not enable thinking gets no thinking block, scripted or not."""
    fake.queue(Text("Hi.", thinking="unused"))
    body = request([user("hi")])
    del body["thinking"]
    _, reply = await send(session, fake, body)
    assert [b["type"] for b in reply["content"]] == ["text"]


async def test_an_omitted_block_streams_only_its_signature(fake, session):
    """ "If you parse the stream yourself, keep the block even when no thinking text arrives:
    it opens, receives its `signature` in a `signature_delta` event, and closes"
    (https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting)."""
    fake.queue(Text("Hi."))
    _, text = await send(session, fake, request([user("hi")], stream=True))
    stream = [data for _, data in events(text)]
    assert stream[2]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert stream[3]["delta"]["type"] == "signature_delta"
    assert stream[4] == {"type": "content_block_stop", "index": 0}


async def test_a_changed_tool_result_before_a_block_is_refused(fake, session):
    """Clearing an earlier ``tool_result`` is "Invalid for every later thinking block"; the
    400 names the first failing block and where the content first differs (PREFIX_CHECKS;
    message as documented, with the header sentence "If the request didn't send the beta
    header")."""
    messages = await converse(session, fake, 2)
    messages[2]["content"][0]["content"] = "[cleared]"
    status, error = await send(session, fake, request(messages))
    assert status == 400
    assert error["error"] == {
        "type": "invalid_request_error",
        "message": f"messages.3.content.0: {BOUND}{NO_HEADER} Content before this block "
        "differs from when it was created, first at `messages.2.content.0`.",
    }
    assert fake.requests[-1].thinking.refused


async def test_a_changed_system_prompt_is_named(fake, session):
    """ "A prefix check fails if `system`, `tools`, or an earlier message changed"; the message
    "usually ends with a sentence naming what changed, for example that the `system` prompt
    ... differs" (PREFIX_CHECKS)."""
    messages = await converse(session, fake, 1)
    body = request(messages, system=[{"type": "text", "text": "You are terse."}])
    status, error = await send(session, fake, body)
    assert status == 400
    assert error["error"]["message"] == (
        f"messages.1.content.0: {BOUND}{NO_HEADER} The `system` prompt differs from when the "
        "block was created."
    )


async def test_a_changed_tool_list_is_named(fake, session):
    """A changed ``tools`` list fails the check, named "The `tools` list differs from when the
    block was created." (PREFIX_CHECKS; the sentence as captured from the API)."""
    messages = await converse(session, fake, 1)
    tools = [*TOOLS, {"name": "Read", "input_schema": {"type": "object"}}]
    status, error = await send(session, fake, request(messages, tools=tools))
    assert status == 400
    assert error["error"]["message"].endswith(
        "The `tools` list differs from when the block was created."
    )


async def test_moving_cache_control_passes(fake, session):
    """ "Add, move, or remove `cache_control` markers | Valid" (OVERVIEW, "What counts as an
    edit")."""
    messages = await converse(session, fake, 2)
    messages[0]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    messages[2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    status, _ = await send(session, fake, request(messages))
    assert status == 200


async def test_other_request_fields_are_not_in_the_prefix(fake, session):
    """ "Change any request parameter outside `system`, `tools`, and `messages` (`effort`,
    `max_tokens`, `output_config`, `tool_choice`, `metadata`, `thinking.display`, and so on) |
    Valid" (OVERVIEW)."""
    messages = await converse(session, fake, 2)
    body = request(
        messages,
        max_tokens=100,
        metadata={"user_id": "x"},
        output_config={"effort": "low"},
        tool_choice={"type": "auto"},
        thinking={"type": "adaptive", "display": "summarized"},
    )
    status, _ = await send(session, fake, body)
    assert status == 200


async def test_a_string_content_equals_its_text_block(fake, session):
    """ "JSON formatting and key order don't matter; the values do" (OVERVIEW, FAQ): a user
    message sent as a string, then as the one text block it stands for, is the same prefix."""
    fake.queue(ToolCalls([Call("Bash", {"command": "ls"})]))
    _, reply = await send(session, fake, request([{"role": "user", "content": "List."}]))
    result = {"type": "tool_result", "tool_use_id": reply["content"][-1]["id"], "content": "a"}
    messages = [
        {"role": "user", "content": [{"text": "List.", "type": "text"}]},
        {"role": "assistant", "content": reply["content"]},
        {"role": "user", "content": [result]},
    ]
    status, _ = await send(session, fake, request(messages))
    assert status == 200


async def test_removing_all_thinking_passes(fake, session):
    """ "Remove `thinking` blocks from the start of the history, from the end, or all of them |
    Valid (the model loses that reasoning)" (OVERVIEW)."""
    messages = await converse(session, fake, 3)
    status, _ = await send(session, fake, request(without_thinking(messages, 1, 3, 5)))
    assert status == 200


async def test_removing_blocks_from_the_start_passes(fake, session):
    """ "You can remove thinking blocks from the start of the history (oldest first)"
    (OVERVIEW)."""
    messages = await converse(session, fake, 3)
    status, _ = await send(session, fake, request(without_thinking(messages, 1, 3)))
    assert status == 200


async def test_removing_blocks_from_the_end_passes(fake, session):
    """ "... from the end, or all of them" (OVERVIEW)."""
    messages = await converse(session, fake, 3)
    status, _ = await send(session, fake, request(without_thinking(messages, 5)))
    assert status == 200


async def test_removing_a_middle_block_is_refused(fake, session):
    """ "What fails is a gap: the thinking blocks you keep must be an unbroken run of the
    original sequence, so removing one from the middle invalidates the thinking blocks after
    it" (OVERVIEW). The reason sentence is the fake's (not documented)."""
    messages = await converse(session, fake, 3)
    status, error = await send(session, fake, request(without_thinking(messages, 3)))
    assert status == 400
    assert error["error"]["message"] == (
        f"messages.5.content.0: {BOUND}{NO_HEADER} A thinking block before this one was left "
        "out or moved."
    )


async def test_putting_a_removed_block_back_is_refused(fake, session):
    """ "Once you remove a block, leave it out. Putting it back invalidates the thinking blocks
    produced while it was gone" (OVERVIEW)."""
    messages = await converse(session, fake, 1)
    fake.queue(ToolCalls([Call("Bash", {"command": "pwd"})]))
    _, reply = await send(session, fake, request(without_thinking(messages, 1)))
    result = {"type": "tool_result", "tool_use_id": reply["content"][-1]["id"], "content": "/"}
    messages += [
        {"role": "assistant", "content": reply["content"]},
        {"role": "user", "content": [result]},
    ]
    status, error = await send(session, fake, request(messages))
    assert status == 400
    assert error["error"]["message"].startswith("messages.3.content.0: ")


async def test_drop_block_with_the_header_drops_and_lists(fake, session):
    """With ``prefix_mismatch_behavior: "drop_block"`` and the beta header "the API drops each
    failing block and every thinking block after it, and the request succeeds. Dropped blocks
    aren't billed", listed in ``input_transformations`` with reason
    ``prefix_binding_mismatch`` (OVERVIEW)."""
    messages = await converse(session, fake, 3)
    messages[2]["content"][0]["content"] = "[cleared]"
    body = request(messages, thinking=DROP)
    _, counted, _ = await post(
        session, f"{fake.url}/v1/messages/count_tokens", request(without_thinking(messages, 3, 5))
    )
    status, reply = await send(session, fake, body, **{"anthropic-beta": BETA})
    assert status == 200
    assert reply["input_transformations"] == [
        {"type": "thinking_dropped", "path": path, "reason": "prefix_binding_mismatch"}
        for path in ("messages.3.content.0", "messages.5.content.0")
    ]
    assert fake.requests[-1].input_tokens == counted["input_tokens"]
    assert len(fake.requests[-1].thinking.dropped) == 2


async def test_drop_block_without_the_header_is_refused(fake, session):
    """ "Sending it without the beta header returns a 400 error whose message ends
    `block_binding: Extra inputs are not permitted`" (OVERVIEW; the path as captured)."""
    status, error = await send(session, fake, request([user("hi")], thinking=DROP))
    assert status == 400
    assert error["error"]["message"] == (
        "thinking.adaptive.block_binding: Extra inputs are not permitted"
    )


async def test_with_the_header_every_response_lists_its_transformations(fake, session):
    """ "The `thinking-binding-controls-2026-08-01` beta header adds: A top-level
    `input_transformations` array on every response"; "The array is empty when no block was
    dropped" (OVERVIEW). In a stream it "arrives on the `message` object in the
    `message_start` event"."""
    headers = {"anthropic-beta": f"other-beta, {BETA}"}
    _, reply = await send(session, fake, request([user("hi")]), **headers)
    _, text = await send(session, fake, request([user("hi")], stream=True), **headers)
    assert reply["input_transformations"] == []
    assert events(text)[0][1]["message"]["input_transformations"] == []


async def test_with_the_header_the_refusal_leaves_out_the_header_sentence(fake, session):
    """The sentence about the header is there only "If the request didn't send the beta
    header" (OVERVIEW): with it, the refusal goes on with the reason."""
    messages = await converse(session, fake, 1)
    messages[0]["content"][0]["text"] = "Count the folders."
    status, error = await send(session, fake, request(messages), **{"anthropic-beta": BETA})
    assert status == 400
    assert error["error"]["message"] == (
        f"messages.1.content.0: {BOUND} Content before this block differs from when it was "
        "created, first at `messages.0.content.0`."
    )


async def test_a_tampered_signature_is_refused_even_with_drop_block(fake, session):
    """ "A tampered or undecryptable signature is a different failure. It always returns a 400
    (Invalid `signature` in `thinking` block with no sentence about the conversation), and
    `prefix_mismatch_behavior` doesn't apply to it" (OVERVIEW)."""
    messages = await converse(session, fake, 1)
    messages[1]["content"][0]["signature"] = "forged"
    body = request(messages, thinking=DROP)
    status, error = await send(session, fake, body, **{"anthropic-beta": BETA})
    assert status == 400
    assert error["error"]["message"] == (
        "messages.1.content.0: Invalid `signature` in `thinking` block."
    )


async def test_changed_thinking_text_is_a_tampered_block(fake, session):
    """A block whose text is not what the API sent fails as tampered: the signature does not
    match it (OVERVIEW's tampered case)."""
    messages = await converse(session, fake, 1)
    messages[1]["content"][0]["thinking"] = "I made this up."
    status, error = await send(session, fake, request(messages))
    assert status == 400
    assert error["error"]["message"] == (
        "messages.1.content.0: Invalid `signature` in `thinking` block."
    )


async def test_count_tokens_runs_the_same_check(fake, session):
    """ "The token counting endpoint runs the same prefix check and returns the same 400"
    (OVERVIEW)."""
    messages = await converse(session, fake, 2)
    messages[2]["content"][0]["content"] = "[cleared]"
    status, error, _ = await post(
        session, f"{fake.url}/v1/messages/count_tokens", request(messages)
    )
    assert status == 400
    assert error["error"]["message"].startswith(f"messages.3.content.0: {BOUND}")


async def test_kept_blocks_are_billed_at_their_thinking(fake, session):
    """ "On models with preserved thinking, usable blocks stay in context and are billed as
    input" (OVERVIEW): a block shown empty still counts its thinking tokens."""
    fake.configure(thinking_tokens=500)
    messages = await converse(session, fake, 1)
    url = f"{fake.url}/v1/messages/count_tokens"
    _, kept, _ = await post(session, url, request(messages))
    _, left_out, _ = await post(session, url, request(without_thinking(messages, 1)))
    assert kept["input_tokens"] - left_out["input_tokens"] >= 450


async def test_lost_thinking_is_re_created_once(fake, session):
    """Dropped thinking "isn't billed, but a session's token usage might still increase
    because Claude can sometimes think more to re-create the dropped thinking" (OVERVIEW).
    The fake's estimate (stated): the first request that holds a reply without its block pays
    that block's thinking tokens again as output; later requests do not."""
    messages = await converse(session, fake, 2)
    lean = without_thinking(messages, 1, 3)
    fake.queue(Text("a"), Text("a"))
    _, first = await send(session, fake, request(lean))
    _, again = await send(session, fake, request(lean))
    thought = again["usage"]["output_tokens"] - 1  # each block's default thinking; "a" is 1
    assert first["usage"]["output_tokens"] == again["usage"]["output_tokens"] + 2 * thought
    assert (fake.requests[2].rethink_tokens, fake.requests[3].rethink_tokens) == (2 * thought, 0)


async def test_an_unreadable_block_is_dropped_silently(fake, session):
    """ "If the current model can't read a block, the API drops it from that request without
    an error" (OVERVIEW); "Only Claude Fable 5.2 and Claude Mythos 5.2 read Claude Fable 5.2
    thinking blocks" (https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2).
    "Without the header, the drop is silent"."""
    messages = await converse(session, fake, 1, model="claude-fable-5-2")
    status, reply = await send(session, fake, request(messages))
    assert status == 200
    assert "input_transformations" not in reply
    (dropped,) = fake.requests[-1].thinking.dropped
    assert dropped == {
        "type": "thinking_dropped",
        "path": "messages.1.content.0",
        "reason": "model_binding_mismatch",
    }


async def test_an_unreadable_block_is_listed_with_the_header(fake, session):
    """With the beta header each block the model cannot read is listed "with `reason:
    "model_binding_mismatch"`" (OVERVIEW)."""
    messages = await converse(session, fake, 1, model="claude-fable-5-2")
    _, reply = await send(session, fake, request(messages), **{"anthropic-beta": BETA})
    assert reply["input_transformations"] == [
        {
            "type": "thinking_dropped",
            "path": "messages.1.content.0",
            "reason": "model_binding_mismatch",
        }
    ]


async def test_haiku_5_5_blocks_replay_on_another_model(fake, session):
    """ "Claude Haiku 5.5 is an exception: its thinking blocks are not locked to the model that
    produced them and replay unchanged on other models" (https://docs.aws.amazon.com/bedrock/
    latest/userguide/claude-messages-thinking-block-binding.html; the Claude API page is not
    found)."""
    messages = await converse(session, fake, 1, model="claude-haiku-5-5")
    _, reply = await send(session, fake, request(messages), **{"anthropic-beta": BETA})
    assert reply["input_transformations"] == []


async def test_a_model_without_the_check_is_not_checked(fake, session):
    """Only the models in ``supportedModels`` run the check (PREFIX_CHECKS): on Claude Sonnet
    4.5 an edited prefix and an unknown signature pass, as before."""
    messages = await converse(session, fake, 1, model="claude-sonnet-4-5")
    messages[1]["content"].insert(0, {"type": "thinking", "thinking": "x", "signature": "s"})
    messages[0]["content"][0]["text"] = "Something else."
    status, _ = await send(session, fake, request(messages, model="claude-sonnet-4-5"))
    assert status == 200


async def test_the_default_thinking_length_is_configurable(fake, session):
    """``thinking_tokens`` (``POST /_fake/config``) sets about how many tokens of thinking a
    reply without scripted thinking carries, billed as output."""
    status, config, _ = await post(session, f"{fake.url}/_fake/config", {"thinking_tokens": 1000})
    fake.queue(Text("a"))
    _, reply = await send(session, fake, request([user("hi")]))
    assert (status, config["thinking_tokens"]) == (200, 1000)
    assert 900 < reply["usage"]["output_tokens"] < 1100


async def test_an_explicit_error_behaves_as_the_default(fake, session):
    """ "`"error"` (the default): the API rejects the request with a 400
    `invalid_request_error` that names the first failing block" (OVERVIEW): set explicitly,
    with the header, a failed check is still refused."""
    messages = await converse(session, fake, 1)
    messages[0]["content"][0]["text"] = "Count the folders."
    thinking = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}}
    status, error = await send(
        session, fake, request(messages, thinking=thinking), **{"anthropic-beta": BETA}
    )
    assert status == 400
    assert error["error"]["message"].startswith(f"messages.1.content.0: {BOUND} Content")
