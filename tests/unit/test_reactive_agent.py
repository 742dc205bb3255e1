"""The reactive benchmark agent (``condensate.testing.fake_model.agent``): it takes a step only
once its request shows what the step needs, gets back what it can (recall, read again, run
again) at the cost of a call, and fails a step whose need cannot be had again."""

from __future__ import annotations

from typing import Any

from condensate.testing.fake_model import Text, ToolCalls
from condensate.testing.fake_model.agent import (
    Action,
    Again,
    Dialect,
    Need,
    ReactiveAgent,
    Turn,
)

LINE = "def render_rows(rows, fmt): return table_of(rows)"
FILE_NEED = Need(LINE, "line 40 of src/cli.py", "src/cli.py", Again("read", "src/cli.py"))
ONCE_NEED = Need("E   AssertionError: flaky", "the one-off failure", "./ci/flaky 1", None)
HUMAN = Need("[HUMAN-MARKER-1]", "the human's message 1", None, None)
TOOLS = [{"name": "read"}, {"name": "shell"}]


def body(*texts: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An Anthropic request whose conversation holds ``texts``."""
    messages = [{"role": "user", "content": text} for text in texts]
    return {"model": "claude-opus-5-5", "messages": messages, "tools": tools or TOOLS}


def agent(*needs: Need) -> ReactiveAgent:
    turn = Turn(
        "Fix it [HUMAN-MARKER-1]",
        (Action("run", "./ci/apply 1", "Editing src/cli.py.", needs),),
        "Done.",
        (HUMAN,),
    )
    playing = ReactiveAgent((turn,), Dialect("native"))
    playing.begin(1)
    return playing


def called(reply: object) -> tuple[str, dict[str, Any]]:
    assert isinstance(reply, ToolCalls)
    (call,) = reply.calls
    assert isinstance(call.arguments, dict)
    return call.name, dict(call.arguments)


def test_a_step_whose_need_is_shown_is_taken_at_once():
    """The request shows the line the edit needs: the agent makes the edit, no extra call."""
    playing = agent(FILE_NEED)
    assert called(playing.next(body(f"[HUMAN-MARKER-1] {LINE}"))) == (
        "shell",
        {"command": "./ci/apply 1"},
    )
    playing.accept()
    assert (playing.step, playing.extra_calls, playing.failed_steps) == (1, 0, 0)


def test_a_missing_file_line_is_read_again_first():
    """The file's line is gone: the agent reads the file again (an extra call), then edits."""
    playing = agent(FILE_NEED)
    assert called(playing.next(body("[HUMAN-MARKER-1]"))) == ("read", {"path": "src/cli.py"})
    playing.accept()
    assert (playing.step, playing.extra_calls, playing.refetches) == (0, 1, 1)
    assert called(playing.next(body("[HUMAN-MARKER-1]", LINE)))[0] == "shell"
    playing.accept()
    assert (playing.step, playing.failed_steps) == (1, 0)


def test_recall_is_used_when_a_receipt_names_the_result_and_offers_it():
    """A receipt names the one-off run and offers recall: the agent recalls it by seq rather
    than failing (the one-off cannot be run again)."""
    playing = agent(ONCE_NEED)
    shown = (
        "[receipt seq 12: shell(./ci/flaky 1), 900 tokens cleared; the action failed; rerun "
        "or reread to see its effect, or recall(seq=12) for the original]"
    )
    assert called(playing.next(body("[HUMAN-MARKER-1]", shown))) == ("recall", {"seq": 12})
    playing.accept()
    assert (playing.extra_calls, playing.recalls) == (1, 1)


def test_a_receipt_without_recall_is_no_way_back():
    """A receipt that offers no recall (the thread has no such tool) cannot bring a one-off
    back: the step fails."""
    playing = agent(ONCE_NEED)
    shown = "[receipt seq 12: shell(./ci/flaky 1), 900 tokens cleared; the action failed]"
    assert called(playing.next(body("[HUMAN-MARKER-1]", shown)))[0] == "shell"
    playing.accept()
    assert playing.failed_steps == 1


def test_a_need_that_cannot_be_had_again_fails_the_step():
    """The one-off failure is gone and nothing can bring it back: the step is taken anyway
    and counted failed."""
    playing = agent(ONCE_NEED)
    assert called(playing.next(body("[HUMAN-MARKER-1]")))[0] == "shell"
    playing.accept()
    assert playing.failed_steps == 1
    assert playing.failures[0].why == "cannot be had again"
    assert playing.extra_calls == 0


def test_a_need_still_missing_after_its_refetch_fails_the_step():
    """The re-read did not bring the line back (cleared again): one attempt, then a failure."""
    playing = agent(FILE_NEED)
    playing.next(body("[HUMAN-MARKER-1]"))
    playing.accept()
    assert called(playing.next(body("[HUMAN-MARKER-1]")))[0] == "shell"
    playing.accept()
    assert playing.failures[0].why == "missing after a refetch"
    assert (playing.extra_calls, playing.failed_steps) == (1, 1)


def test_a_refused_request_moves_nothing():
    """No ``accept`` (the provider refused the request): the same step is asked for again."""
    playing = agent(FILE_NEED)
    first = playing.next(body(f"[HUMAN-MARKER-1] {LINE}"))
    second = playing.next(body(f"[HUMAN-MARKER-1] {LINE}"))
    assert called(first) == called(second)
    assert (playing.step, playing.calls) == (0, 0)


def test_the_answer_needs_the_humans_instruction():
    """The turn's answer follows the human's message: without it the step fails."""
    playing = agent()
    playing.next(body("nothing"))
    playing.accept()
    assert isinstance(playing.next(body("nothing")), Text)
    playing.accept()
    assert playing.failures[-1].need == "the human's message 1"


def test_each_engine_reads_runs_and_recalls_with_its_own_tools():
    """Claude Code reads with Read at an absolute path, runs with Bash and recalls by the
    MCP tool's name; Codex reads and runs with exec_command and recalls in the MCP server's
    namespace."""
    claude, codex = Dialect("claude", "/w"), Dialect("codex", "/w")
    assert claude.call("read", "src/a.py", "", "c1").arguments == {"file_path": "/w/src/a.py"}
    assert claude.call("run", "ls", "list", "c2").name == "Bash"
    assert claude.recall(7, "c3").name == "mcp__condensate__recall"
    assert codex.call("read", "src/a.py", "", "c4").arguments == {"cmd": "cat src/a.py"}
    recall = codex.recall(7, "c5")
    assert (recall.name, recall.namespace, recall.arguments) == (
        "recall",
        "mcp__condensate",
        {"seq": 7},
    )
