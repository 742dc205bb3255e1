"""Paging in the view (``condensate.core.paging`` and the projector): a result over the thread's
output cap shows its beginning and a reference, its original kept; receipts of a thread whose
agent has recall say how to get the original back."""

from __future__ import annotations

from condensate.core import paging
from condensate.core.messages import ToolOutput
from condensate.core.projector import Projection, snapshot
from condensate.core.prompt import to_messages
from condensate.events import ThreadCreated, ToolResult, Window, WindowTrigger
from condensate.testing.threads import EPOCH, ThreadBuilder


def thread(output_cap: int | None = None, recall: bool = False) -> ThreadBuilder:
    b = ThreadBuilder()
    b.log.clear()
    b.view = Projection()
    b.add(
        ThreadCreated(
            at=EPOCH, engine="api", model=b.model, cwd="/", output_cap=output_cap, recall=recall
        ),
        0,
    )
    b.user("brief", 10)
    return b


def test_a_result_over_the_cap_shows_its_beginning_and_a_reference() -> None:
    """A 40,000-token result under a 1,000-token cap: the view shows a fortieth of its
    characters and the notice naming its seq and where to read on; the event keeps it all."""
    b = thread(output_cap=1_000)
    text = "x" * 160_000
    _, stored = b.call("read", "big.txt", 40_000, output=text)
    (entry,) = [e for e in b.view.entries if e.seq == stored.seq]
    assert entry.paged == 4_000
    assert isinstance(entry.event, ToolResult)
    assert entry.event.output == text
    assert entry.tokens < 2_000
    (output,) = [
        block
        for message in to_messages(b.view)
        for block in message.content
        if isinstance(block, ToolOutput)
    ]
    assert output.output == paging.shown(text, 4_000, stored.seq)
    assert f'ref="{stored.seq}", offset=4000' in output.output


def test_a_result_under_the_cap_or_without_one_is_shown_whole() -> None:
    """No cap, or a result within it: nothing is paged."""
    for b in (thread(), thread(output_cap=50_000)):
        b.call("read", "big.txt", 40_000, output="y" * 1_000)
        assert all(e.paged is None for e in b.view.entries)


def test_a_paged_view_survives_a_snapshot() -> None:
    """The paged entry comes back from a snapshot as it was."""
    b = thread(output_cap=1_000)
    b.call("read", "big.txt", 40_000, output="z" * 160_000)
    assert snapshot.load(snapshot.dump(b.view)).entries == b.view.entries


def test_receipts_say_how_to_recall_when_the_agent_can() -> None:
    """A cleared result's receipt names recall(seq=N) on a thread whose agent has recall,
    and not elsewhere."""
    for recall in (True, False):
        b = thread(recall=recall)
        _, stored = b.call("read", "a.txt", 5_000)
        trigger = WindowTrigger(used=1, line=1, ceiling=1, window=1, freed=1, reason="t")
        b.add(
            Window(
                at=b.tick(),
                window_kind="microcompact",
                cut=b.seq,
                cleared=(stored.seq,),
                trigger=trigger,
            ),
            0,
        )
        (entry,) = [e for e in b.view.entries if e.seq == stored.seq]
        assert entry.receipt is not None
        assert (f"recall(seq={stored.seq})" in entry.receipt) is recall
