"""Where the command line shows a cost (``condensate status``, ``threads``, ``chat``'s status
line, ``compact``'s preview), a model without a price is one line that names it and the
setting that prices it, never "price unknown"."""

from __future__ import annotations

from condensate import api
from condensate.cli.output import compaction_lines, cost_text
from condensate.core.preview import Pricing, preview
from condensate.core.prices import price_of
from tests.unit.test_planner import usage
from tests.unit.test_preview import ONE_KEPT, thread, working

NO_PRICE = "no price for claude-foo-9 (set CONDENSATE_PRICES)"


def test_a_threads_cost_is_dollars_and_calls():
    """A priced thread shows its cost and its calls."""
    costs = {"usd": 0.01234, "calls": 3, "unpriced": []}
    assert cost_text(costs) == "$0.0123 (3 calls)"


def test_a_thread_on_an_unpriced_model_shows_the_no_price_line():
    """The cost is the one line naming the model and CONDENSATE_PRICES."""
    costs = {"usd": None, "calls": 3, "unpriced": ["claude-foo-9"]}
    assert cost_text(costs) == NO_PRICE


def shown(pricing: Pricing) -> list[str]:
    """``condensate compact``'s lines for a thread, as the API answers them."""
    b = thread()
    answer = api.preview_answer(preview(b.view, usage(b), ONE_KEPT, pricing, now=b.clock)).dump()
    return compaction_lines(
        {"ask": None, "requested": None, "usage": {"used": 1, "line": 2}, "preview": answer}
    )


def test_a_preview_on_an_unpriced_model_names_it_where_each_cost_would_be():
    """Each tier's cost and the curator's say "no price for …" once each, and the API lists
    the model as unpriced."""
    b = thread()
    unpriced = Pricing("claude-foo-9", None, "claude-foo-9", None, 4_000)
    answer = api.preview_answer(preview(b.view, usage(b), ONE_KEPT, unpriced, now=b.clock)).dump()
    assert answer["unpriced"] == ["claude-foo-9"]
    lines = shown(unpriced)
    tiers = [line for line in lines if "would" in line]
    assert len(tiers) == 3
    assert all(NO_PRICE in line for line in tiers)
    assert not any("price unknown" in line or "$" in line for line in lines)


def test_a_priced_preview_shows_dollars_and_an_unpriced_curator_its_line():
    """The thread's model priced, its curator not: the tiers show dollars, the summary's
    curator call the no-price line."""
    priced = Pricing("claude-opus-5-5", price_of("claude-opus-5-5"), "claude-foo-9", None, 4_000)
    (summary,) = [line for line in shown(priced) if line.startswith("summary")]
    assert "$" in summary
    assert summary.endswith(NO_PRICE)


def test_the_thinking_a_thread_went_without_follows_its_cost():
    """Thinking the calls went without is said beside the cost, blocks and tokens; nothing is
    said when none was lost."""
    costs = {
        "usd": 0.5,
        "calls": 9,
        "unpriced": [],
        "thinkingDropped": {"blocks": 3, "tokens": 1234},
    }
    assert cost_text(costs) == "$0.5000 (9 calls), thinking dropped: 3 blocks (~1,234 tokens)"
    none = {**costs, "thinkingDropped": {"blocks": 0, "tokens": 0}}
    assert cost_text(none) == "$0.5000 (9 calls)"


def test_each_tier_says_where_the_cache_is_read_its_thinking_and_what_to_fetch_again():
    """Under each tier's line: where the next call reads the cache again and by which rule,
    the thinking it drops and the results the agent would fetch again, each said even when
    there is none."""
    b = working()
    read, edit = b.view.entries[2].seq, b.view.entries[5].seq
    pricing = Pricing("claude-opus-5-5", price_of("claude-opus-5-5"), "claude-foo-9", None, 4_000)
    answer = api.preview_answer(preview(b.view, usage(b), ONE_KEPT, pricing, now=b.clock))
    lines = compaction_lines(
        {"ask": None, "requested": None, "usage": {"used": 1, "line": 2}, "preview": answer.dump()}
    )
    caches = [line for line in lines if line.startswith("  cache: ")]
    assert len(caches) == 3
    assert all("Anthropic" in line for line in caches)
    assert sum(line == "  thinking dropped: none" for line in lines) == 3
    fetches = [line for line in lines if line.startswith("  to fetch again: ")]
    assert len(fetches) == 3
    assert f"seq {read} read(src/a.py) named at seq {edit}" in fetches[-1]
