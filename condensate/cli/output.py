"""What the command line prints: one JSON object with ``--json``, else lines a person reads
(usage bars, event lines, a compaction preview)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from condensate.core.prices import no_price
from condensate.core.probes import summary_line
from condensate.events import ProbeReport


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
    """The thread's cost at list price, or the one line naming the models without a price;
    and the signed thinking its calls went without, when they went without any."""
    if costs["usd"] is not None:
        text = f"${costs['usd']:.4f} ({costs['calls']} calls)"
    else:
        text = no_price(", ".join(costs["unpriced"]))
    return text + thinking_dropped_text(costs.get("thinkingDropped"))


def thinking_dropped_text(dropped: dict[str, Any] | None) -> str:
    if not dropped or not dropped["blocks"]:
        return ""
    blocks, tokens = dropped["blocks"], dropped["tokens"]
    return f", thinking dropped: {blocks} block{'s' if blocks != 1 else ''} (~{tokens:,} tokens)"


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
        case "system.line" | "turn.ended":
            # A reason is never cut: a failed turn says why, whole.
            text = (
                event["text"]
                if kind == "system.line"
                else f"{event['outcome']} {event.get('reason', '')}"
            )
            return f"{event['seq']:>6} {kind:<20} {text.rstrip()}"
    return f"{event['seq']:>6} {kind:<20} {first_line(detail, 100)}"


def tier_cost(cost: dict[str, Any], model: str) -> str:
    """What a tier's cut costs: the cached prefix written again, what each call saves, and
    when it has paid for itself; for a model without a price, the line that says so."""
    text = (
        f"rewrites {cost['rewrittenTokens']:,} tokens of a cached prefix of "
        f"{cost['invalidatedTokens']:,}"
    )
    if cost["rewriteUsd"] is None:
        text += f"; {no_price(model)}"
    else:
        text += f" (${cost['rewriteUsd']:,.4f}), saves ${cost['savedPerCallUsd']:,.4f} a call"
    if cost["breakEvenCalls"] is not None:
        text += f", pays off after {cost['breakEvenCalls']:,} calls"
    curator = cost.get("curator")
    if curator is not None:
        text += (
            f"; curator {curator['model']}: ~{curator['inputTokens']:,} tokens in, at most "
            f"{curator['outputTokens']:,} out"
        )
        usd = curator["usd"]
        text += f"; {no_price(curator['model'])}" if usd is None else f" (${usd:,.4f})"
    return text


CACHE_RULES = {
    "anthropic-breakpoints": "Anthropic: the last live request end within 20 blocks before it",
    "openai-prefix": "OpenAI: the prefix it shares, in 128-token steps",
    "first-change": "provider unknown: assumed cached up to the first change",
    "new-session": "a new session: nothing stays cached",
}
"""Where each cache rule reads the cache again (``condensate.core.cache_rules``)."""


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def tier_details(cost: dict[str, Any]) -> list[str]:
    """A tier's cut under its line: where the next call reads the cache again, the signed
    thinking it drops and what the agent would have to fetch again (each said even when
    nothing)."""
    if cost["rewriteFromSeq"] is None:
        cache = "  cache: nothing changes"
    else:
        first = cost["firstChangeSeq"]
        change = "" if first is None else f"first change at seq {first}; "
        cache = (
            f"  cache: the next call reads {cost['readTokens']:,} tokens, writes from seq "
            f"{cost['rewriteFromSeq']} on ({change}{CACHE_RULES[cost['cacheRule']]})"
        )
    dropped = cost["thinkingDropped"]
    thinking = "  thinking dropped: none"
    if dropped["blocks"]:
        thinking = (
            f"  thinking dropped: {_plural(dropped['blocks'], 'block')} "
            f"(~{dropped['tokens']:,} tokens)"
        )
    again = cost["fetchAgain"]
    fetch = "  to fetch again: none"
    if again["results"]:
        items = [
            f"seq {i['seq']} {i['tool']}({i['target']}) named at seq {i['namedBy']}"
            for i in again["items"]
        ]
        more = again["results"] - len(items)
        fetch = (
            f"  to fetch again: {_plural(again['results'], 'result')} "
            f"(~{again['tokens']:,} tokens): " + "; ".join(items)
        )
        fetch += f"; and {more:,} more" if more else ""
    return [cache, thinking, fetch]


def compaction_lines(data: dict[str, Any]) -> list[str]:
    """``GET /threads/:id/compact`` as lines: the ask, the request, the usage, each tier."""
    ask = data["ask"]
    requested = data["requested"]
    preview = data["preview"]
    micro, collapse, summary = preview["microcompact"], preview["collapse"], preview["summary"]
    model = preview.get("model") or "the thread's model"
    lines = [
        f"pending ask: {ask['ask_id']} (deadline {ask['deadline']})" if ask else "no ask",
        f"requested: {requested['mode']} by the {requested['by']} (seq {requested['seq']})"
        if requested
        else "nothing requested",
        f"usage: {data['usage']['used']:,} of line {data['usage']['line']:,}",
        f"microcompact would free {micro['freed']:,} tokens ({len(micro['receipts'])} receipts); "
        + tier_cost(micro["cost"], model),
        *tier_details(micro["cost"]),
        f"collapse would free {collapse['freed']:,} tokens; " + tier_cost(collapse["cost"], model),
        *tier_details(collapse["cost"]),
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
            f"{summary['freed']:,}; " + tier_cost(summary["cost"], model)
        )
        lines += tier_details(summary["cost"])
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


# -- a terminal's view: colours on a terminal, plain text when piped --------------------------

COLOURS = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


@dataclass(frozen=True)
class Style:
    """ANSI colours, only where they help: a terminal, ``NO_COLOR`` unset, ``TERM`` not dumb."""

    on: bool

    @classmethod
    def of(cls, stream: TextIO) -> Style:
        wanted = "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
        return cls(wanted and stream.isatty())

    def __call__(self, text: str, *names: str) -> str:
        if not self.on or not names:
            return text
        codes = ";".join(COLOURS[n] for n in names)
        return f"\033[{codes}m{text}\033[0m"


def table(headers: list[str], rows: list[list[str]], style: Style) -> str:
    """Columns aligned to their widest cell, the header in bold on a terminal."""
    if not rows:
        return ""
    widths = [max(len(h), *(len(strip_ansi(r[i])) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        padded = [c + " " * (w - len(strip_ansi(c))) for c, w in zip(cells, widths, strict=True)]
        return "  ".join(padded).rstrip()

    return "\n".join([style(line(headers), "bold"), *(line(r) for r in rows)])


_ANSI = re.compile(r"\033\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def first_line(text: str, limit: int = 200) -> str:
    """One line of a long text, saying how much more there is."""
    lines = text.strip().splitlines() or [""]
    head = lines[0]
    more = len(lines) - 1
    if len(head) > limit:
        head = head[: limit - 1] + "…"
    return head + (f" (+{more} lines)" if more else "")


def turn_event(event: dict[str, Any], style: Style) -> str | None:
    """One event of a turn as a person follows it (``run``, ``send --wait``, ``chat``): what
    was said, each tool call and how it ended, windows, asks, and how the turn ended; None
    for what a reader need not see (usage counts, snapshots)."""
    match event["kind"]:
        case "message.user":
            who = "" if event.get("author", "human") == "human" else f"[{event['author']}] "
            return style(f"> {who}{event['text']}", "cyan")
        case "message.assistant":
            parts = [event["text"]] if event.get("text") else []
            parts += [
                style(f"  ⚙ {c['name']} {json.dumps(c.get('arguments', {}))[:160]}", "yellow")
                for c in event.get("tool_calls", [])
            ]
            return "\n".join(parts) or None
        case "tool.result":
            mark, colour = ("✗", "red") if event.get("is_error") else ("✓", "green")
            head = f"  {mark} {event['tool']}({event.get('argument', '')})"
            body = first_line(event.get("output", ""))
            return style(head, colour) + (style(f": {body}", "dim") if body else "")
        case "window":
            text = f"── window: {event['window_kind']}, ~{event['trigger']['freed']:,} tokens freed"
            if event.get("author"):
                text += f" (by the {event['author']})"
            return style(text, "magenta")
        case "ask.opened":
            return style(f"── ask {event['ask_id']}: compact before {event['deadline']}", "magenta")
        case "ask.answered":
            return style(f"── ask {event['ask_id']} answered: {event['mode']}", "magenta")
        case "approval.requested":
            line = f"── approval {event['approval_id']} wanted: {event['tool']} {event['argument']}"
            return style(line, "yellow", "bold")
        case "system.line":
            return style(f"── {event['text']}", "dim")
        case "turn.ended":
            outcome = event["outcome"]
            reason = f": {event['reason']}" if event.get("reason") else ""
            colour = "green" if outcome == "completed" else "red"
            return style(f"── turn {outcome}{reason}", colour)
        case _:
            return None
