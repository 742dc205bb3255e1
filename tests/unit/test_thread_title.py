"""A thread's title, what tells threads apart in `threads`, the API and the status page."""

from __future__ import annotations

from condensate.api import title_of


def test_a_threads_title_is_its_briefs_first_line_cut_short() -> None:
    """The title is the brief's first non-empty line, at most 80 characters."""
    assert title_of("\n  Fix the flaky test  \nthen tidy up") == "Fix the flaky test"
    long = title_of("x" * 200)
    assert len(long) == 80
    assert long.endswith("…")
    assert title_of("") == ""
