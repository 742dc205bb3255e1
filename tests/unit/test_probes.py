"""Probes: what a curator summary must hold, drawn from the log (human messages, error texts,
files touched, items still open), how a summary is checked against them and repaired, and how
the report reads."""

from __future__ import annotations

from datetime import timedelta

from condensate.cli.output import event_line as _event_line
from condensate.core.probes import (
    FILES_HEADING,
    OPEN_HEADING,
    Answers,
    Probe,
    missed,
    probes_for,
    repaired,
    report,
    retry_request,
    summary_line,
)
from condensate.core.summary import replaced_entries
from condensate.core.tiers import VERBATIM_ERROR_CHARS
from condensate.events import ApprovalRequested, ProbeReport, UserMessage, Window, WindowTrigger
from condensate.testing.threads import ThreadBuilder
from tests.unit.test_planner import decide


def probes_of(b: ThreadBuilder) -> list[Probe]:
    """The probes of a summary that replaces everything but the brief and the current task."""
    return probes_for(b.view, replaced_entries(b.view, None))


def kinds(probes: list[Probe], kind: str) -> list[str]:
    return [p.needle for p in probes if p.kind == kind]


def test_every_human_message_replaced_is_a_probe_and_no_other_author_is():
    """Human messages are probed verbatim; the runtime's and a parent's words are not."""
    b = ThreadBuilder()
    b.turn("brief")
    b.user("Use SQLite, not Postgres.")
    b.add(UserMessage(at=b.tick(), text="runtime note", author="runtime"), 5)
    b.add(UserMessage(at=b.tick(), text="from the parent", author="parent"), 5)
    b.reply("ok")
    b.user("the current task")
    assert kinds(probes_of(b), "human") == ["Use SQLite, not Postgres."]


def test_a_failed_call_is_probed_with_the_error_text_the_curator_keeps():
    """A long error is probed as the head and tail the verbatim record keeps, not in full."""
    b = ThreadBuilder()
    b.turn("brief")
    short = "E   AssertionError: 2 != 3"
    b.call("shell", "pytest -x", 50, error=True, output=short)
    long_error = "x" * (VERBATIM_ERROR_CHARS + 500)
    b.call("shell", "make", 3_000, error=True, output=long_error)
    b.user("now")
    errors = kinds(probes_of(b), "error")
    assert errors[0] == short
    assert errors[1].startswith("x" * 100)
    assert "characters cut here" in errors[1]
    assert len(errors[1]) < len(long_error)


def test_files_come_from_results_receipts_and_the_earlier_summary():
    """A file is probed when a result or a receipt names it, or an earlier summary's probes
    had it: no file is lost from one summary to the next."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    b.call("read", "src/early.py", 400)
    for _ in range(200):
        b.reply("working", 400)
    b.user("carry on")
    first = decide(b)
    earlier = ProbeReport(checked={"file": 1}, files=("src/early.py",))
    event = first.window(b.seq, b.tick(), summary="earlier work", author="curator", probes=earlier)
    b.add(event, 300)
    b.call("edit", "src/later.py", 400)
    b.call("read", "src/later.py", 400)
    b.user("the current task")
    assert kinds(probes_of(b), "file") == ["src/early.py", "src/later.py"]


def test_a_receipt_names_its_file_for_the_probes():
    """A read a cheap tier cleared still counts as a file touched."""
    b = ThreadBuilder()
    b.turn("brief", 100)
    _, read = b.call("read", "src/cleared.py", 5_000)
    trigger = WindowTrigger(used=1, line=1, ceiling=1, window=1, freed=1, reason="test")
    cleared = Window(
        at=b.tick(), window_kind="microcompact", cut=b.seq, cleared=(read.seq,), trigger=trigger
    )
    b.add(cleared, 0)
    assert b.view.entries[-1].receipt is not None
    b.user("now")
    assert kinds(probes_of(b), "file") == ["src/cleared.py"]


def test_an_instruction_no_completed_turn_followed_is_open():
    """A human instruction before a completed turn is done; one after it is still open."""
    b = ThreadBuilder()
    b.turn("brief")
    b.user("Rename the module.")
    b.reply("renamed")
    b.end("completed")
    b.turn("Add a changelog entry.")
    b.reply("working on it")
    b.end("interrupted")
    b.user("the current task")
    assert kinds(probes_of(b), "open") == ["Add a changelog entry."]


def test_a_pending_approval_and_an_unjoined_child_are_open():
    """What waits on an operator or on a child's join must be stated in the summary."""
    b = ThreadBuilder()
    b.turn("brief")
    b.spawn("child-7")
    b.add(
        ApprovalRequested(
            at=b.tick(),
            approval_id="ap-1",
            tool="shell",
            argument="rm -rf build",
            deadline=b.clock + timedelta(minutes=5),
        ),
        0,
    )
    b.end("completed")
    opened = [p for p in probes_of(b) if p.kind == "open"]
    assert [(p.label, p.needle) for p in opened] == [
        ("approval ap-1 (shell)", "rm -rf build"),
        ("child child-7 not yet joined", "child-7"),
    ]


def test_a_probe_passes_whatever_the_line_breaks():
    """The model may rewrap a message: runs of white space compare as one space."""
    probe = Probe("human", "seq 3 human message", "keep the\npublic API   stable")
    assert missed("They said: keep the public API stable.", [probe]) == []
    assert missed("They said: keep the API stable.", [probe]) == [probe]


def test_the_retry_names_each_missed_item_with_its_text():
    """The retry request quotes what must be copied and names what must be stated."""
    asked = retry_request(
        [
            Probe("human", "seq 3 human message", "Do not touch the lexer."),
            Probe("file", "file src/a.py", "src/a.py"),
        ]
    )
    assert '- seq 3 human message: "Do not touch the lexer."' in asked
    assert "- file src/a.py: src/a.py" in asked


def test_the_repair_appends_missing_files_and_open_items_so_the_probes_pass():
    """Files go on one line, open items under their heading; afterwards nothing is missed."""
    probes = [
        Probe("file", "file src/a.py", "src/a.py"),
        Probe("file", "file src/b.py", "src/b.py"),
        Probe("open", "child c1 not yet joined", "c1"),
    ]
    text = repaired("Summary naming src/a.py.", missed("Summary naming src/a.py.", probes))
    assert f"{FILES_HEADING}src/b.py" in text
    assert f"{OPEN_HEADING}\n- child c1 not yet joined: c1" in text
    assert missed(text, probes) == []


def test_the_report_records_what_each_stage_found():
    """The first answer's misses, the retry's, the repair and anything still failing."""
    human = Probe("human", "seq 3 human message", "keep it")
    file = Probe("file", "file a.py", "a.py")
    found = report([human, file], Answers((human, file), True, (file,)), [file], "keep it; a.py")
    assert found.checked == {"human": 1, "error": 0, "file": 1, "open": 0}
    assert found.missed == ("seq 3 human message", "file a.py")
    assert found.retried
    assert found.missed_after_retry == ("file a.py",)
    assert found.repaired == ("file a.py",)
    assert found.failing == ()
    assert found.files == ("a.py",)


def test_a_passing_summary_reads_as_all_passed():
    found = ProbeReport(checked={"human": 2, "error": 0, "file": 3, "open": 0})
    assert summary_line(found) == "probes: 2 human, 3 file; all passed"


def test_tail_shows_a_window_s_probes_whole():
    """``condensate tail`` shows what the probes found, however long, never cut."""
    labels = tuple(f"seq {n} human message" for n in range(10, 30))
    found = ProbeReport(
        checked={"human": 20, "error": 1, "file": 0, "open": 0},
        missed=labels,
        retried=True,
        missed_after_retry=labels[:2],
        repaired=labels[:2],
        failing=("seq 99 failed shell(make)",),
    )
    event = {
        "seq": 41,
        "kind": "window",
        "window_kind": "summary",
        "author": "curator",
        "trigger": {"freed": 9_000},
        "probes": found.model_dump(mode="json"),
    }
    line = _event_line(event)
    assert "summary freed~9000 by curator" in line
    assert "first answer missed 20: seq 10 human message" in line
    assert "retried, 2 still missed" in line
    assert "repaired: seq 10 human message, seq 11 human message" in line
    assert line.endswith("STILL FAILING: seq 99 failed shell(make)")
