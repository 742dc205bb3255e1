"""Server-side context management on the fake model server, over loopback HTTP: context editing
(https://platform.claude.com/docs/en/build-with-claude/context-editing) and on-demand compaction
(https://platform.claude.com/docs/en/build-with-claude/compaction-on-demand), read through the
project's research digest."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from condensate.testing.fake_model import Call, FakeModelServer, Text, ToolCalls
from tests.integration.fake_api import events, post, user
from tests.integration.test_fake_thinking import converse
from tests.integration.test_fake_thinking import request as thinking_request

EDITING = "https://platform.claude.com/docs/en/build-with-claude/context-editing"
ON_DEMAND = "https://platform.claude.com/docs/en/build-with-claude/compaction-on-demand"
MODEL = "claude-sonnet-4-5"
COMPACT = "compact-2026-09-04"
SUMMARIZE = {"type": "summarize"}
CLEAR_THINKING = "clear_thinking_20251015"
CLEAR_TOOLS = "clear_tool_uses_20250919"


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(window=None) as server:
        yield server


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 1024, "messages": messages, **extra}


def edits(*strategies: dict[str, Any]) -> dict[str, Any]:
    return {"edits": list(strategies)}


def tool_history(names: list[str], output: str = "line\n" * 200) -> list[dict[str, Any]]:
    """A user question, then one answered call of each tool in ``names``."""
    messages = [user("Look around.")]
    for i, name in enumerate(names):
        call = {
            "type": "tool_use",
            "id": f"toolu_{i}",
            "name": name,
            "input": {"arg": "word " * 50},
        }
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": output}
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return messages


async def send(
    session: aiohttp.ClientSession, fake: FakeModelServer, request: dict[str, Any], **headers: str
) -> tuple[int, Any]:
    status, reply, _ = await post(session, f"{fake.url}/v1/messages", request, **headers)
    return status, reply


async def counted(session: aiohttp.ClientSession, fake: FakeModelServer, request: Any) -> int:
    _, reply, _ = await post(session, f"{fake.url}/v1/messages/count_tokens", request)
    return int(reply["input_tokens"])


async def test_keep_all_clears_nothing(fake, session):
    """Claude Code's ``clear_thinking_20251015`` with ``keep: "all"`` applies nothing, and the
    response says so: ``applied_edits: []`` "when nothing was applied" (EDITING; secondary)."""
    messages = await converse(session, fake, 2)
    request = thinking_request(
        messages, context_management=edits({"type": CLEAR_THINKING, "keep": "all"})
    )
    plain = await counted(session, fake, thinking_request(messages))
    status, reply = await send(session, fake, request)
    assert status == 200
    assert reply["context_management"] == {"applied_edits": []}
    assert fake.requests[-1].input_tokens == plain


async def test_clear_thinking_keeps_the_last_turns(fake, session):
    """``keep: {"type": "thinking_turns", "value": 1}`` removes the thinking of all but the last
    assistant turn before the model reads the prompt, reported as ``cleared_thinking_turns``
    and ``cleared_input_tokens`` (EDITING). The thinking check still passes: "the check
    compares what you sent, not the server's edited copy" (preserved thinking)."""
    messages = await converse(session, fake, 3)
    keep_one = {"type": CLEAR_THINKING, "keep": {"type": "thinking_turns", "value": 1}}
    request = thinking_request(messages, context_management=edits(keep_one))
    whole = await counted(session, fake, thinking_request(messages))
    status, reply = await send(session, fake, request)
    (applied,) = reply["context_management"]["applied_edits"]
    assert status == 200
    assert applied["type"] == CLEAR_THINKING
    assert applied["cleared_thinking_turns"] == 2
    assert fake.requests[-1].input_tokens == whole - applied["cleared_input_tokens"]
    assert applied["cleared_input_tokens"] > 300
    assert fake.requests[-1].rethink_tokens == 0


async def test_clear_thinking_must_come_first(fake, session):
    """``clear_thinking_20251015`` after another strategy is a 400 (captured from the API,
    secondary)."""
    request = body(
        [user("hi")],
        context_management=edits({"type": CLEAR_TOOLS}, {"type": CLEAR_THINKING, "keep": "all"}),
    )
    status, error = await send(session, fake, request)
    assert status == 400
    assert error["error"]["message"] == (
        "context_management: `clear_thinking_20251015` must be the first strategy in "
        "`context_management.edits` when provided"
    )


async def test_tool_results_are_cleared_past_the_trigger(fake, session):
    """Past the ``trigger``, older tool results are cleared and the last ``keep`` tool uses
    stay: "`keep` | 3 tool uses | Defines how many recent tool use/result pairs to keep after
    clearing occurs" (EDITING); the response counts them."""
    messages = tool_history(["Bash"] * 4)
    strategy = {
        "type": CLEAR_TOOLS,
        "trigger": {"type": "tool_uses", "value": 2},
        "keep": {"type": "tool_uses", "value": 1},
    }
    whole = await counted(session, fake, body(messages))
    _, reply = await send(session, fake, body(messages, context_management=edits(strategy)))
    (applied,) = reply["context_management"]["applied_edits"]
    assert applied["type"] == CLEAR_TOOLS
    assert applied["cleared_tool_uses"] == 3
    assert fake.requests[-1].input_tokens == whole - applied["cleared_input_tokens"]
    assert applied["cleared_input_tokens"] > 3 * 150


async def test_nothing_is_cleared_under_the_trigger(fake, session):
    """The default trigger is "100,000 input tokens" (EDITING): a short prompt is left whole."""
    messages = tool_history(["Bash"] * 5)
    _, reply = await send(
        session, fake, body(messages, context_management=edits({"type": CLEAR_TOOLS}))
    )
    assert reply["context_management"] == {"applied_edits": []}


async def test_excluded_tools_are_never_cleared(fake, session):
    """ "`exclude_tools` | None | List of tool names whose tool uses and results should never be
    cleared" (EDITING)."""
    messages = tool_history(["Read", "Bash", "Read", "Bash"])
    strategy = {
        "type": CLEAR_TOOLS,
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 0},
        "exclude_tools": ["Read"],
    }
    _, reply = await send(session, fake, body(messages, context_management=edits(strategy)))
    assert reply["context_management"]["applied_edits"][0]["cleared_tool_uses"] == 2


async def test_clearing_too_little_applies_nothing(fake, session):
    """ "`clear_at_least` ... If the API can't clear at least the specified amount, the strategy
    will not be applied" (EDITING)."""
    messages = tool_history(["Bash"] * 2)
    strategy = {
        "type": CLEAR_TOOLS,
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
        "clear_at_least": {"type": "input_tokens", "value": 50_000},
    }
    _, reply = await send(session, fake, body(messages, context_management=edits(strategy)))
    assert reply["context_management"] == {"applied_edits": []}


async def test_clear_tool_inputs_clears_the_calls_too(fake, session):
    """ "`clear_tool_inputs` | `false` | Controls whether the tool call parameters are cleared
    along with the tool results" (EDITING)."""
    messages = tool_history(["Bash"] * 3)
    strategy = {
        "type": CLEAR_TOOLS,
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
    }
    _, results_only = await send(session, fake, body(messages, context_management=edits(strategy)))
    with_inputs = {**strategy, "clear_tool_inputs": True}
    _, both = await send(session, fake, body(messages, context_management=edits(with_inputs)))
    only = results_only["context_management"]["applied_edits"][0]["cleared_input_tokens"]
    more = both["context_management"]["applied_edits"][0]["cleared_input_tokens"]
    assert more > only + 2 * 40


async def test_applied_edits_arrive_on_the_final_message_delta(fake, session):
    """ "For streaming responses, the context edits are included in the final `message_delta`
    event" (EDITING)."""
    messages = tool_history(["Bash"] * 2)
    strategy = {
        "type": CLEAR_TOOLS,
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
    }
    request = body(messages, context_management=edits(strategy), stream=True)
    _, text = await send(session, fake, request)
    stream = [data for _, data in events(text)]
    assert "context_management" not in stream[0]["message"]
    assert stream[-2]["type"] == "message_delta"
    assert stream[-2]["context_management"]["applied_edits"][0]["cleared_tool_uses"] == 1


async def test_the_window_check_reads_the_edited_prompt(session):
    """Edits are "Applied before the prompt reaches Claude" (EDITING): a prompt over the window
    as sent, under it once cleared, is answered."""
    messages = tool_history(["Bash"] * 4, output="line\n" * 400)
    strategy = {
        "type": CLEAR_TOOLS,
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
    }
    async with FakeModelServer(window=1_500) as small:
        refused, _ = await send(session, small, body(messages))
        status, _ = await send(session, small, body(messages, context_management=edits(strategy)))
    assert (refused, status) == (400, 200)


async def test_compaction_needs_its_beta_header(fake, session):
    """Without ``anthropic-beta: compact-2026-09-04`` the field is unknown: 400 "compaction:
    Extra inputs are not permitted" ("Send the `compact-2026-09-04` beta header on the request
    that asks for the summary", ON_DEMAND; the message is the fake's reading of the API's
    extra-field error)."""
    status, error = await send(session, fake, body([user("hi")], compaction=SUMMARIZE))
    assert status == 400
    assert error["error"]["message"] == "compaction: Extra inputs are not permitted"


async def test_compaction_and_context_management_do_not_mix(fake, session):
    """ "You can't combine `compaction` with `context_management` on one request" (ON_DEMAND)."""
    request = body([user("hi")], compaction=SUMMARIZE, context_management=edits())
    status, _ = await send(session, fake, request, **{"anthropic-beta": COMPACT})
    assert status == 400


async def test_compaction_returns_one_signed_block(fake, session):
    """ "The API summarizes every message in the request once, generates no reply after it, and
    returns the block alone with `stop_reason` "compaction""; "The top-level `input_tokens` and
    `output_tokens` are zero because no reply was generated", the cost is the ``compaction``
    entry of ``usage.iterations`` (ON_DEMAND)."""
    messages = tool_history(["Bash"] * 2)
    prompt = await counted(session, fake, body(messages))
    status, reply = await send(
        session, fake, body(messages, compaction=SUMMARIZE), **{"anthropic-beta": COMPACT}
    )
    (block,) = reply["content"]
    assert status == 200
    assert block["type"] == "compaction"
    assert "5 messages" in block["content"]
    assert block["signature"]
    assert reply["stop_reason"] == "compaction"
    assert (reply["usage"]["input_tokens"], reply["usage"]["output_tokens"]) == (0, 0)
    (iteration,) = reply["usage"]["iterations"]
    assert iteration["type"] == "compaction"
    assert iteration["input_tokens"] == prompt
    assert iteration["output_tokens"] > 5
    assert fake.requests[-1].compaction == "summarized"


async def test_a_queued_text_is_the_summary(fake, session):
    """The summary is the model's: a queued ``Text`` reply is its text (the fake's scripting)."""
    fake.queue(Text("They looked around twice."))
    _, reply = await send(
        session, fake, body([user("hi")], compaction=SUMMARIZE), **{"anthropic-beta": COMPACT}
    )
    assert reply["content"][0]["content"] == "They looked around twice."


async def test_a_streamed_compaction_arrives_whole(fake, session):
    """ "one `content_block_start` event carrying the complete block, then `content_block_stop`,
    with no `content_block_delta` events" (ON_DEMAND)."""
    request = body([user("hi")], compaction=SUMMARIZE, stream=True)
    _, text = await send(session, fake, request, **{"anthropic-beta": COMPACT})
    names = [name for name, _ in events(text)]
    start = events(text)[2][1]["content_block"]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert start["type"] == "compaction"
    assert start["content"].startswith("Summary")


async def test_with_the_compaction_beta_every_response_has_iterations(fake, session):
    """ "With the compaction beta enabled, every response includes `usage.iterations`, even if
    no compaction occurred" (https://platform.claude.com/docs/en/build-with-claude/compaction,
    copy)."""
    fake.queue(Text("ok"))
    _, reply = await send(session, fake, body([user("hi")]), **{"anthropic-beta": COMPACT})
    usage = reply["usage"]
    assert usage["iterations"] == [
        {
            "type": "message",
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
        }
    ]


async def compacted(session: aiohttp.ClientSession, fake: FakeModelServer, messages: Any) -> Any:
    """The compaction block for ``messages``."""
    _, reply = await send(
        session, fake, body(messages, compaction=SUMMARIZE), **{"anthropic-beta": COMPACT}
    )
    return reply["content"][0]


async def test_a_carried_block_round_trips(fake, session):
    """The block goes first in ``messages`` on the next request, which is answered; "Sending a
    block back on later requests adds no compaction cost" and its content counts as prompt
    (ON_DEMAND)."""
    block = await compacted(session, fake, tool_history(["Bash"] * 2))
    later = [{"role": "user", "content": [block, {"type": "text", "text": "Go on."}]}]
    status, reply = await send(session, fake, body(later), **{"anthropic-beta": COMPACT})
    assert status == 200
    assert [i["type"] for i in reply["usage"]["iterations"]] == ["message"]
    assert fake.requests[-1].compaction == "carried"
    assert fake.requests[-1].input_tokens > await counted(session, fake, body([user("Go on.")]))


async def test_a_block_not_first_is_refused(fake, session):
    """ "If any remain in front of the block, the request returns a 400 error
    (`compaction_block_misplaced`)" (ON_DEMAND)."""
    block = await compacted(session, fake, [user("hi")])
    later = [user("First."), {"role": "assistant", "content": [block]}, user("Go on.")]
    status, error = await send(session, fake, body(later), **{"anthropic-beta": COMPACT})
    assert status == 400
    assert error["error"]["message"].startswith("compaction_block_misplaced: messages.1.content.0")


async def test_a_forged_block_is_refused(fake, session):
    """A block whose signature the API did not issue: 400 ``compaction_signature_invalid``
    (secondary source for the code)."""
    block = {**await compacted(session, fake, [user("hi")]), "signature": "forged"}
    later = [{"role": "assistant", "content": [block]}, user("Go on.")]
    status, error = await send(session, fake, body(later), **{"anthropic-beta": COMPACT})
    assert status == 400
    assert error["error"]["message"].startswith("compaction_signature_invalid")


async def test_an_edited_summary_is_refused(fake, session):
    """A block whose content was changed: 400 ``compaction_content_mismatch`` (secondary source
    for the code)."""
    block = await compacted(session, fake, [user("hi")])
    later = [{"role": "assistant", "content": [{**block, "content": "Edited."}]}, user("Go on.")]
    status, error = await send(session, fake, body(later), **{"anthropic-beta": COMPACT})
    assert status == 400
    assert error["error"]["message"].startswith("compaction_content_mismatch")


async def test_turns_kept_after_a_compaction_keep_their_thinking(fake, session):
    """Summarize the older turns, keep the newer ones after the block: their thinking stays
    valid, as "With server-side compaction, the checked prefix starts at the most recent
    compaction block" (https://platform.claude.com/docs/en/build-with-claude/
    preserved-thinking)."""
    messages = await converse(session, fake, 3)
    older, kept = messages[:3], messages[3:]
    _, reply = await send(
        session,
        fake,
        thinking_request(older, compaction=SUMMARIZE),
        **{"anthropic-beta": COMPACT},
    )
    later = [{"role": "user", "content": reply["content"]}, *copy.deepcopy(kept)]
    fake.queue(ToolCalls([Call("Bash", {"command": "pwd"})]))
    status, _ = await send(session, fake, thinking_request(later), **{"anthropic-beta": COMPACT})
    assert status == 200
    assert fake.requests[-1].thinking.checked == 2
    assert fake.requests[-1].thinking.dropped == ()


async def test_keeping_no_thinking_turns_is_refused(fake, session):
    """``keep: {"type": "thinking_turns", "value": N}``: "N must be > 0" (EDITING); the 400's
    wording is the fake's."""
    keep_none = {"type": CLEAR_THINKING, "keep": {"type": "thinking_turns", "value": 0}}
    status, error = await send(
        session, fake, body([user("hi")], context_management=edits(keep_none))
    )
    assert status == 400
    assert error["error"]["message"].endswith("N must be > 0")
