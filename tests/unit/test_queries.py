"""Questions the runtime and engines ask of a view (``condensate.core.queries``)."""

from __future__ import annotations

from condensate.core.queries import human_since
from condensate.testing.threads import ThreadBuilder


def test_human_since_reads_only_what_arrived_after_a_seq():
    """``human_since`` gives the human messages after a seq, oldest first, and nothing else."""
    b = ThreadBuilder()
    b.user("first")
    mark = b.reply("ok").seq
    b.user("second")
    b.call("read", "a.py")
    b.user("third")
    assert human_since(b.view, mark) == ["second", "third"]
    assert human_since(b.view, b.seq) == []
