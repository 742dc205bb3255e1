"""Request-scoped notices near the line (``condensate.core.near_limits``): none below 70 % of the
line, URGENT from 70 %, CRITICAL from 90 %, each naming the share and the sizes."""

from __future__ import annotations

import pytest

from condensate.core import near_limits
from condensate.core.meter import ContextUsage
from condensate.testing.builders import RESERVE, usage


def at(used: int, line: int = 10_000) -> ContextUsage:
    return usage(used=used, ceiling=line + RESERVE)


@pytest.mark.parametrize(
    ("used", "level"),
    [
        (6_999, None),
        (7_000, "URGENT"),
        (8_999, "URGENT"),
        (9_000, "CRITICAL"),
        (12_000, "CRITICAL"),
    ],
)
def test_the_notice_rises_with_the_share_of_the_line(used: int, level: str | None) -> None:
    """Below 70 % nothing; from 70 % URGENT; from 90 % CRITICAL."""
    text = near_limits.notice(at(used))
    if level is None:
        assert text is None
    else:
        assert text is not None
        assert text.startswith(f"[Condensate] {level}:")
        assert f"{used * 100 // 10_000}% of its line ({used:,} of 10,000 tokens)" in text


def test_no_line_means_no_notice() -> None:
    """A line of zero or less (a window smaller than its reserves) tells no percentage."""
    assert near_limits.notice(at(5, line=0)) is None
