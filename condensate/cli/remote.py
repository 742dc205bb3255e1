"""The commands that talk to a running daemon over its HTTP API (found by itself, with its
token): ``run``, ``threads``, ``status``, ``tail``, ``compact``, ``approvals``, ``approve``,
``stop``, ``pin``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from condensate.cli.output import (
    compaction_lines,
    cost_text,
    emit,
    event_line,
    line_reason,
    usage_bar,
)
from condensate.client import DaemonClient
from condensate.settings import Settings


def cmd_threads(settings: Settings, args: argparse.Namespace) -> int:
    data = DaemonClient.find(settings).call("GET", "/threads")
    rows = [
        f"{t['id']}  {t['engine']:<6} {t['status']:<8} {t['model']:<32} {t['events']:>6} events"
        for t in data["threads"]
    ]
    emit(args, data, "\n".join(rows) or "no threads")
    return 0


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    data = DaemonClient.find(settings).call("GET", "/threads")
    rows = []
    for t in data["threads"]:
        usage = t["usage"]
        ask = "  ask pending" if t["pendingAsk"] else ""
        why = line_reason(t)
        bar = usage_bar(usage["used"], usage["line"])
        rows.append(f"{t['id']}  {bar}  {cost_text(t['costs'])}{why}{ask}")
    emit(args, data, "\n".join(rows) or "no threads")
    return 0


def _follow(
    client: DaemonClient, thread: str, after: int, args: argparse.Namespace, until_turn_ends: bool
) -> int:
    while True:
        page = client.call("GET", f"/threads/{thread}/tail?after={after}&limit=1000&wait=25")
        for event in page["events"]:
            sys.stdout.write((json.dumps(event) if args.json else event_line(event)) + "\n")
            sys.stdout.flush()
            if until_turn_ends and event["kind"] == "turn.ended":
                return 0
        after = page["nextAfter"]


def cmd_tail(settings: Settings, args: argparse.Namespace) -> int:
    client = DaemonClient.find(settings)
    if args.follow:
        return _follow(client, args.thread, args.after, args, until_turn_ends=False)
    history = "&history=1" if args.history else ""
    data = client.call(
        "GET", f"/threads/{args.thread}/tail?after={args.after}&limit={args.limit}{history}"
    )
    emit(args, data, "\n".join(event_line(e) for e in data["events"]) or "no events")
    return 0


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    client = DaemonClient.find(settings)
    body = {
        **({"engine": args.engine} if args.engine else {}),
        "model": args.model,
        "cwd": str(Path(args.cwd).resolve()),
        "brief": args.brief,
        "persona": args.persona,
        "head": args.head,
    }
    thread = client.call("POST", "/threads", body)
    if args.detach:
        emit(args, thread, thread["id"])
        return 0
    sys.stderr.write(f"thread {thread['id']}\n")
    return _follow(client, thread["id"], 0, args, until_turn_ends=True)


def cmd_compact(settings: Settings, args: argparse.Namespace) -> int:
    client = DaemonClient.find(settings)
    path = f"/threads/{args.thread}/compact"
    if args.answer is None:
        data = client.call("GET", path)
        emit(args, data, "\n".join(compaction_lines(data)))
        return 0
    body: dict[str, Any] = {"mode": args.answer, "reason": args.reason}
    if args.summary is not None:
        body["summary"] = args.summary
    if args.keep_from is not None:
        body["keepFrom"] = args.keep_from
    data = client.call("POST", path, body)
    emit(args, data, "queued" if data["queued"] else "answered")
    return 0


def cmd_approvals(settings: Settings, args: argparse.Namespace) -> int:
    """The tool calls a thread with ``permissions: "ask"`` waits on."""
    data = DaemonClient.find(settings).call("GET", f"/threads/{args.thread}/approvals")
    lines = [
        f"{a['id']}  {a['tool']}  {a['argument']}  (denied at {a['deadline']})"
        for a in data["approvals"]
    ]
    emit(args, data, "\n".join(lines) or "nothing waits for an answer")
    return 0


def cmd_approve(settings: Settings, args: argparse.Namespace) -> int:
    """Allow (or with ``--deny`` deny) one pending tool call."""
    body = {
        "id": args.approval,
        "decision": "deny" if args.deny else "allow",
        "reason": args.reason,
    }
    data = DaemonClient.find(settings).call("POST", f"/threads/{args.thread}/approvals", body)
    done = {"allow": "allowed", "deny": "denied"}[data["decision"]]
    emit(args, data, f"{done} {data['id']}")
    return 0


def cmd_stop(settings: Settings, args: argparse.Namespace) -> int:
    """End the thread's running turn (``POST /threads/:id/interrupt``)."""
    data = DaemonClient.find(settings).call("POST", f"/threads/{args.thread}/interrupt", {})
    emit(args, data, f"interrupted {data['thread']}")
    return 0


def cmd_pin(settings: Settings, args: argparse.Namespace) -> int:
    """Keep a message of the thread through every tier (``POST /threads/:id/pins``)."""
    data = DaemonClient.find(settings).call(
        "POST", f"/threads/{args.thread}/pins", {"seq": args.seq}
    )
    emit(args, data, f"pinned seq {data['pinned']}; kept: {', '.join(map(str, data['pins']))}")
    return 0
