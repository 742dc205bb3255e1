"""What the command line prints: one JSON object with ``--json``, else lines a person reads
(usage bars, event lines, a compaction preview)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from condensate.events import ProbeReport
from condensate.probes import summary_line


def emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    sys.stdout.write((json.dumps(data, default=str) if args.json else text) + "\n")


def usage_bar(used: int, line: int, width: int = 30) -> str:
    share = used / line if line else 1.0
    filled = min(width, round(share * width))
    return f"[{'#' * filled}{'.' * (width - filled)}] {share:4.0%} {used:>8,}/{line:,}"


def line_reason(thread: dict[str, Any]) -> str:
    """Why a line stands above the working ceiling (a head's is the window less the
    reserves), and why the last request went on past it, if one did."""
    usage = thread["usage"]
    why = ""
    if thread["head"] and usage["line"] > usage["ceiling"]:
        why += f"  head: line is the window ({usage['window']:,}) less reserves"
    if thread.get("overLine"):
        why += f"  over the line: {thread['overLine']}"
    return why


def cost_text(costs: dict[str, Any]) -> str:
    """The thread's cost at list price, or which model has no price."""
    if costs["usd"] is not None:
        return f"${costs['usd']:.4f} ({costs['calls']} calls)"
    return f"cost unknown: no price for {', '.join(costs['unpriced'])}"


def event_line(event: dict[str, Any]) -> str:
    kind = event["kind"]
    detail = ""
    match kind:
        case "message.user":
            detail = event["text"]
        case "message.assistant":
            calls = ", ".join(c["name"] for c in event.get("tool_calls", []))
            detail = (event.get("text") or "") + (f" [calls: {calls}]" if calls else "")
        case "tool.result":
            status = "error" if event.get("is_error") else "ok"
            detail = f"{event['tool']}({event.get('argument', '')}) {status}"
        case "window":
            detail = f"{event['window_kind']} freed~{event['trigger']['freed']}"
            if event.get("probes"):
                # What the probes found is never cut: a summary that failed must be seen.
                probes = summary_line(ProbeReport.model_validate(event["probes"]))
                return f"{event['seq']:>6} {kind:<20} {detail} by {event['author']}; {probes}"
        case "system.line":
            detail = event["text"]
        case "turn.ended":
            detail = f"{event['outcome']} {event.get('reason', '')}"
    return f"{event['seq']:>6} {kind:<20} {detail[:100]}"


def dollars(usd: float | None) -> str:
    return "price unknown" if usd is None else f"${usd:,.4f}"


def tier_cost(cost: dict[str, Any]) -> str:
    """What a tier's cut costs: the cached prefix written again, what each call saves, and
    when it has paid for itself."""
    text = (
        f"rewrites {cost['rewrittenTokens']:,} tokens of a cached prefix of "
        f"{cost['invalidatedTokens']:,} ({dollars(cost['rewriteUsd'])}), saves "
        f"{dollars(cost['savedPerCallUsd'])} a call"
    )
    if cost["breakEvenCalls"] is not None:
        text += f", pays off after {cost['breakEvenCalls']:,} calls"
    curator = cost.get("curator")
    if curator is not None:
        text += (
            f"; curator {curator['model']}: ~{curator['inputTokens']:,} tokens in, at most "
            f"{curator['outputTokens']:,} out ({dollars(curator['usd'])})"
        )
    return text


def compaction_lines(data: dict[str, Any]) -> list[str]:
    """``GET /threads/:id/compact`` as lines: the ask, the request, the usage, each tier."""
    ask = data["ask"]
    requested = data["requested"]
    preview = data["preview"]
    micro, collapse, summary = preview["microcompact"], preview["collapse"], preview["summary"]
    lines = [
        f"pending ask: {ask['ask_id']} (deadline {ask['deadline']})" if ask else "no ask",
        f"requested: {requested['mode']} by the {requested['by']} (seq {requested['seq']})"
        if requested
        else "nothing requested",
        f"usage: {data['usage']['used']:,} of line {data['usage']['line']:,}",
        f"microcompact would free {micro['freed']:,} tokens ({len(micro['receipts'])} receipts); "
        + tier_cost(micro["cost"]),
        f"collapse would free {collapse['freed']:,} tokens; " + tier_cost(collapse["cost"]),
    ]
    if summary["possible"]:
        removed = ", ".join(f"{k} {v:,}" for k, v in sorted(summary["removedByKind"].items()))
        kept = (
            "keep only the brief and pins"
            if summary["keepFrom"] is None
            else f"keep from seq {summary['keepFrom']}"
        )
        lines.append(
            f"summary would {kept}, removing {removed or 'nothing'} tokens, and free "
            f"{summary['freed']:,}; " + tier_cost(summary["cost"])
        )
    else:
        lines.append("summary: not possible now (nothing before the kept range to summarize)")
    return lines


def progress_bar() -> Callable[[str, int, int], None] | None:
    """A progress bar on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(policy: str, done: int, total: int) -> None:
        if done % 25 and done != total:
            return
        width = 30
        filled = round(width * done / total) if total else width
        sys.stderr.write(f"\r{policy:<15} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show
