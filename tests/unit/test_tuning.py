"""Settings given by name (``condensate replay --set``): each read as its field's type."""

from __future__ import annotations

import pytest

from condensate.core.ceilings import CeilingSettings
from condensate.core.planner import PlannerSettings
from condensate.core.tuning import TuningError, tuned


def test_each_kind_of_setting_is_read_as_its_type() -> None:
    """Whole numbers, shares, an optional share unset with none, a tier by its name, a list
    of tools, and a ceiling's cap that was unset."""
    planner, ceilings = tuned(
        PlannerSettings(),
        CeilingSettings(),
        [
            "keep_pairs=4",
            "target_share=0.5",
            "early_share=none",
            "early_tier=microcompact",
            "exclude_tools=Edit,mcp__x__Write",
            "cap_all=90000",
            "thrash_turns=5",
        ],
    )
    tiers = planner.tiers
    assert (tiers.keep_pairs, tiers.target_share, tiers.early_share) == (4, 0.5, None)
    assert tiers.early_tier == "microcompact"
    assert tiers.exclude_tools == frozenset({"edit", "write"})
    assert ceilings.cap_all == 90_000
    assert planner.thrash_turns == 5


@pytest.mark.parametrize(
    ("assignment", "said"),
    [
        ("keep_pears=3", "There is no setting 'keep_pears'"),
        ("keep_pairs", "--set takes name=value"),
        ("keep_pairs=3.5", "keep_pairs takes a whole number"),
        ("target_share=half", "target_share takes a number"),
        ("early_tier=summary", "early_tier takes one of microcompact, collapse"),
    ],
)
def test_a_bad_setting_is_named(assignment: str, said: str) -> None:
    """A name that is no setting, a missing value, or a value of the wrong type says which."""
    with pytest.raises(TuningError, match=said):
        tuned(PlannerSettings(), CeilingSettings(), [assignment])
