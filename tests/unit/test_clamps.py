"""Clamps (``condensate.core.clamps``, the projector, the native prompt, the gateway's rewrite):
any one message, tool result or tool argument longer than the thread's clamp keeps its head
and tail in the view, the original in the log, and a note naming where to read it back."""

from __future__ import annotations

import json
from typing import Any

from condensate.core import clamps
from condensate.core.messages import Text, ToolUse
from condensate.core.projector import Projection, snapshot
from condensate.core.prompt import to_messages
from condensate.events import AssistantMessage, ThreadCreated, ToolCall, ToolResult
from condensate.gateway.dialects import anthropic, openai
from condensate.runtime.gateway_port import Clamps
from condensate.testing.threads import EPOCH, ThreadBuilder

CAP_TOKENS = 250
CAP = clamps.cap_chars(CAP_TOKENS)  # 1,000 characters


def thread(clamp_tokens: int | None = CAP_TOKENS, output_cap: int | None = None) -> ThreadBuilder:
    b = ThreadBuilder()
    b.log.clear()
    b.view = Projection()
    b.add(
        ThreadCreated(
            at=EPOCH,
            engine="api",
            model=b.model,
            cwd="/",
            clamp_tokens=clamp_tokens,
            output_cap=output_cap,
        ),
        0,
    )
    b.user("brief", 10)
    return b


def test_a_long_text_keeps_its_head_and_tail_around_a_note():
    """Half the cap from each end; the note says how much was cut and where to read on."""
    text = "h" * 900 + "MIDDLE" + "t" * 900
    shown = clamps.clamp(text, CAP, 7)
    assert shown.startswith("h" * 500 + "\n[... ")
    assert shown.endswith("]\n" + "t" * 500)
    assert "MIDDLE" not in shown
    assert f"806 of {len(text):,} characters clamped here" in shown
    assert 'read_tool_output(ref="7", offset=500, length=...)' in shown


def test_a_text_that_fits_is_left_alone():
    assert clamps.clamp("short", CAP, 7) == "short"


def test_only_the_long_strings_of_a_call_s_arguments_are_clamped():
    """Nested strings too; each says the whole call is read from the message's seq."""
    arguments = {"path": "a.py", "edits": [{"new": "n" * 3_000}], "count": 3}
    shown = clamps.clamp_value(arguments, CAP, 9)
    assert shown["path"] == "a.py"
    assert shown["count"] == 3
    assert len(shown["edits"][0]["new"]) < 1_200
    assert (
        'read_tool_output(ref="9") reads the whole message with its calls'
        in shown["edits"][0]["new"]
    )


def test_a_long_result_is_clamped_in_the_view_and_whole_in_the_log():
    b = thread()
    output = "o" * 600 + "MIDDLE" + "e" * 4_000
    _, stored = b.call("read", "big.txt", 1_200, output=output)
    entry = b.view.entries[-1]
    assert entry.clamped == CAP
    assert isinstance(entry.event, ToolResult)
    assert entry.event.output == output
    assert "MIDDLE" not in entry.shown_output()
    assert entry.tokens < 400
    assert f'ref="{stored.seq}"' in entry.shown_output()


def test_a_long_human_message_is_clamped_the_brief_s_rule_too():
    """Any one message: the view shows its head and tail, the event keeps it."""
    b = thread()
    stored = b.user("u" * 5_000, 1_250)
    entry = b.view.entries[-1]
    assert entry.seq == stored.seq
    assert len(entry.shown_text()) < 1_200
    last = to_messages(b.view)[-1]
    assert last.role == "user"
    assert Text(entry.shown_text()) in last.content


def test_a_long_argument_is_clamped_in_the_prompt():
    """The native prompt carries the clamped arguments; the text that fits stays whole."""
    b = thread()
    call = ToolCall(id="c1", name="write", arguments={"path": "a.py", "content": "c" * 5_000})
    b.add(AssistantMessage(at=b.tick(), text="Writing.", tool_calls=(call,)), 1_300)
    b.add(ToolResult(at=b.tick(), call_id="c1", tool="write", argument="a.py", output="ok"), 5)
    messages = to_messages(b.view)
    (use,) = [blk for m in messages for blk in m.content if isinstance(blk, ToolUse)]
    assert use.arguments["path"] == "a.py"
    assert len(use.arguments["content"]) < 1_200
    assert Text("Writing.") in messages[-2].content
    assert b.view.entries[-2].tokens < 500


def test_a_paged_result_is_paged_not_clamped():
    """An output cap pages a result first: the page rule, not the clamp, applies to it."""
    b = thread(output_cap=100)
    b.call("read", "big.txt", 2_000, output="p" * 8_000)
    entry = b.view.entries[-1]
    assert entry.paged is not None
    assert entry.clamped is None


def test_a_thread_created_without_a_clamp_clamps_nothing():
    """Threads created before clamps keep their views exactly."""
    b = thread(clamp_tokens=None)
    b.user("u" * 50_000, 12_500)
    b.call("read", "big.txt", 12_500, output="r" * 50_000)
    assert all(e.clamped is None for e in b.view.entries)
    assert b.view.clamped == 0


def test_a_clamped_view_survives_a_snapshot():
    b = thread()
    b.user("u" * 5_000, 1_250)
    again = snapshot.load(snapshot.dump(b.view))
    assert again.entries[-1].shown_text() == b.view.entries[-1].shown_text()
    assert again.clamp_chars == CAP
    assert again.clamped == 1


def messages_body(text: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": text}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "Write", "input": arguments}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]},
            {"role": "user", "content": "a short one"},
        ],
    }


def test_the_gateway_clamps_the_texts_and_calls_the_log_clamped():
    """A text by its digest, a call by its id; what the log never clamped is untouched."""
    long_text = "L" * 3_000
    found = Clamps(CAP, {clamps.digest(long_text): 4}, {"c1": 5})
    body = messages_body(long_text, {"content": "w" * 3_000, "path": "a.py"})
    out, changed = anthropic.with_clamps(body, found)
    assert changed == 2
    user, assistant, result, short = out["messages"]
    assert user["content"][0]["text"] == clamps.clamp(long_text, CAP, 4)
    assert assistant["content"][0]["input"]["path"] == "a.py"
    assert 'ref="5"' in assistant["content"][0]["input"]["content"]
    assert result is body["messages"][2]
    assert short is body["messages"][3]


def test_the_gateway_leaves_an_unlogged_long_text_alone():
    """A long text the log does not hold (the CLI's own) is no clamp of the view's."""
    body = messages_body("N" * 3_000, {"path": "a.py"})
    out, changed = anthropic.with_clamps(body, Clamps(CAP, {"other": 1}, {}))
    assert changed == 0
    assert out["messages"] == body["messages"]


def test_the_gateway_clamps_responses_items():
    """A message's input text, a function call's JSON arguments and a custom call's input."""
    long_text = "R" * 3_000
    body = {
        "model": "m",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": long_text}],
            },
            {
                "type": "function_call",
                "call_id": "f1",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "echo " + "e" * 3_000}),
            },
            {
                "type": "custom_tool_call",
                "call_id": "p1",
                "name": "apply_patch",
                "input": "p" * 3_000,
            },
        ],
    }
    found = Clamps(CAP, {clamps.digest(long_text): 3}, {"f1": 6, "p1": 8})
    out, changed = openai.with_clamps(body, found)
    assert changed == 3
    message, function, custom = out["input"]
    assert message["content"][0]["text"] == clamps.clamp(long_text, CAP, 3)
    command = json.loads(function["arguments"])["cmd"]
    assert command.startswith("echo " + "e" * 495)
    assert 'ref="6"' in command
    assert 'ref="8"' in custom["input"]
    assert len(custom["input"]) < 1_200


def test_read_tool_output_reads_an_assistant_message_with_its_calls():
    """The original of a clamped argument is read from the message's seq."""
    text = clamps.readable("Writing.", [("c1", "write", {"content": "c" * 10})])
    assert text == 'Writing.\n[tool call c1] write {"content": "cccccccccc"}'
