"""The results: each policy's ``PolicyResult`` (bills, windows, retention checks) and the
``Report`` comparing them, as JSON and as ``text_report``'s table, with the cost ratios.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from condensate.core.retention import Retention
from condensate.events import AssistantMessage, Event, ToolResult, UserMessage, Window
from condensate.replay.billing import WEIGHTS, Bill, Prices
from condensate.replay.config import ReplayConfig
from condensate.replay.recording import Recording


@dataclass(frozen=True)
class PolicyResult:
    policy: str
    bill: Bill
    main: Bill
    summaries: Bill
    calls: int
    refusals: int
    stopped: tuple[str, ...]
    windows: dict[str, int]
    summaries_written: int
    summary_tokens_max: int
    peak_prompt: int
    limit: int
    window: int
    first_overflow_call: int | None
    holds: dict[str, int]
    retention: Retention
    cumulative: tuple[float, ...]
    taken: tuple[tuple[str, int], ...] = ()
    """Each window in order: its kind, and how many model calls were made before it."""

    def to_json(self, prices: Prices) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "model_calls": self.calls,
            "billed": self.bill.to_json(prices),
            "weighted_input": round(self.bill.weighted),
            "cache_read_share": self.bill.to_json(prices)["cache_read_share"],
            "cost_usd": round(self.bill.cost(prices), 4),
            "thread_calls": self.main.to_json(prices),
            "summary_calls": self.summaries.to_json(prices),
            "windows": dict(sorted(self.windows.items())),
            "summaries_written": self.summaries_written,
            "summary_tokens_max": self.summary_tokens_max,
            "peak_prompt": self.peak_prompt,
            "limit": self.limit,
            "window": self.window,
            "peak_share_of_limit": round(self.peak_prompt / self.limit, 3) if self.limit else None,
            "refusals": self.refusals,
            "stopped_calls": len(self.stopped),
            "stop_reasons": sorted(set(self.stopped))[:3],
            "hold_backs": dict(sorted(self.holds.items())),
            "first_overflow_call": self.first_overflow_call,
            "retention": self.retention.to_json(),
        }


def windows_by_call(events: Iterable[Event]) -> tuple[tuple[str, int], ...]:
    """Each window's kind and the model calls before it (how a replay and the daemon's log
    are compared)."""
    calls = 0
    out: list[tuple[str, int]] = []
    for event in events:
        if isinstance(event, AssistantMessage):
            calls += 1
        elif isinstance(event, Window):
            out.append((event.window_kind, calls))
    return tuple(out)


@dataclass(frozen=True)
class Report:
    recording: Recording
    config: ReplayConfig
    window: int
    curator: str
    results: dict[str, PolicyResult]

    def ratios(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        ours = self.results.get("condensate")
        if ours is None:
            return out
        for name, other in self.results.items():
            if name != "condensate":
                key = f"condensate_vs_{name.replace('-', '_')}"
                out[key] = (
                    round(ours.bill.weighted / other.bill.weighted, 3)
                    if other.bill.weighted
                    else None
                )
        unmanaged = self.results.get("unmanaged")
        if unmanaged is not None and unmanaged.first_overflow_call is not None:
            n = unmanaged.first_overflow_call - 1
            if 0 < n <= len(ours.cumulative) and unmanaged.cumulative[n - 1]:
                out["condensate_vs_unmanaged_until_first_overflow"] = round(
                    ours.cumulative[n - 1] / unmanaged.cumulative[n - 1], 3
                )
        return out

    def to_json(self) -> dict[str, Any]:
        rec = self.recording
        return {
            "recording": {
                "name": rec.name,
                "source": rec.source,
                "engine": rec.engine,
                "model": rec.model,
                "baseline_tokens": rec.baseline,
                "events": len(rec.events),
                "model_calls": rec.model_calls,
                "human_messages": sum(
                    isinstance(e, UserMessage) and e.author == "human" for e in rec.events
                ),
                "tool_results": sum(isinstance(e, ToolResult) for e in rec.events),
                "failed_tool_results": sum(
                    isinstance(e, ToolResult) and e.is_error for e in rec.events
                ),
            },
            "window": self.window,
            "curator": self.curator,
            "weights": WEIGHTS,
            # Every field, tier included (null: billed as input, or no tier).
            "prices_usd_per_mtok": self.config.prices.model_dump(mode="json"),
            "policies": {n: r.to_json(self.config.prices) for n, r in self.results.items()},
            "ratios": self.ratios(),
        }


def text_report(report: Report) -> str:
    """The human-readable form of a report."""
    data = report.to_json()
    rec = data["recording"]
    lines = [
        f"replay of {rec['name']} ({rec['source']}, {rec['model']}): {rec['model_calls']} model "
        f"calls, {rec['tool_results']} tool results ({rec['failed_tool_results']} failed), "
        f"{rec['human_messages']} human messages; window {data['window']:,}, baseline "
        f"{rec['baseline_tokens']:,}, curator {data['curator']}",
        "weights: uncached 1.0, cache write 1.25, cache read 0.1",
        "",
        f"{'policy':<15} {'weighted in':>12} {'uncached':>10} {'cache rd':>11} {'cache wr':>10} "
        f"{'rd share':>8} {'cost $':>8} {'peak/limit':>17} {'windows':<28} retention",
    ]
    for name, r in data["policies"].items():
        b = r["billed"]
        windows = ", ".join(f"{k} {v}" for k, v in r["windows"].items()) or "none"
        failed = [k for k, v in r["retention"].items() if isinstance(v, dict) and not v["passed"]]
        lines.append(
            f"{name:<15} {b['weighted_input']:>12,} {b['uncached']:>10,} {b['cache_read']:>11,} "
            f"{b['cache_write']:>10,} {b['cache_read_share']:>8.1%} {b['cost_usd']:>8.2f} "
            f"{r['peak_prompt']:>8,}/{r['limit']:<8,} {windows:<28} "
            f"{'pass' if not failed else 'FAIL: ' + ', '.join(failed)}"
        )
    for name, r in data["policies"].items():
        extra = []
        if r["summaries_written"]:
            extra.append(
                f"{r['summaries_written']} summaries (largest {r['summary_tokens_max']:,} tokens)"
            )
        if r["refusals"]:
            extra.append(f"{r['refusals']} refusals (first at call {r['first_overflow_call']})")
        if r["stopped_calls"]:
            extra.append(f"{r['stopped_calls']} calls not sent: {r['stop_reasons']}")
        for key in ("human", "errors", "files", "pairs", "ceiling"):
            check_ = r["retention"][key]
            if not check_["passed"]:
                lost = f"{check_['failed']}/{check_['total']}"
                extra.append(f"{key} {lost} lost, e.g. {check_['examples'][:2]}")
        if extra:
            lines.append(f"  {name}: " + "; ".join(extra))
    if data["ratios"]:
        lines.append("")
        lines += [f"{k}: {v}" for k, v in data["ratios"].items()]
    return "\n".join(lines)
