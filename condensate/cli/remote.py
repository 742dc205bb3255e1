"""The commands that talk to a running daemon over its HTTP API (found by itself, with its
token): ``run``, ``send``, ``threads``, ``status``, ``tail``, ``compact``, ``approvals``,
``approve``, ``stop``, ``pin``."""

from __future__ import annotations

import argparse
import json
import sys
import webbrowser
from pathlib import Path
from typing import Any

import anyio

from condensate.cli import follow
from condensate.cli.chat import chat
from condensate.cli.output import (
    Style,
    compaction_lines,
    cost_text,
    emit,
    event_line,
    line_reason,
    table,
    usage_bar,
)
from condensate.client import AsyncDaemonClient, DaemonClient, status_page_url
from condensate.settings import Settings


def cmd_threads(settings: Settings, args: argparse.Namespace) -> int:
    data = DaemonClient.find(settings).call("GET", "/threads")
    if args.quiet:
        sys.stdout.writelines(f"{t['id']}\n" for t in data["threads"])
        return 0
    style = Style.of(sys.stdout)
    colour = {"running": "green", "waiting-for-approval": "yellow", "idle": "dim"}
    rows = [
        [
            t["id"],
            t.get("title", ""),  # a thread another daemon owns shows no title
            t.get("engine", ""),
            style(t["status"], colour.get(t["status"], "yellow")),
            t.get("model", ""),
            t.get("cwd", ""),
            f"{t['events']:,}",
        ]
        for t in data["threads"]
    ]
    headings = ["THREAD", "TITLE", "ENGINE", "STATUS", "MODEL", "CWD", "EVENTS"]
    text = table(headings, rows, style)
    emit(args, data, text or "no threads")
    return 0


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    data = DaemonClient.find(settings).call("GET", "/threads")
    style = Style.of(sys.stdout)
    rows = []
    for t in data["threads"]:
        usage = t["usage"]
        notes = line_reason(t).strip()
        if t["pendingAsk"]:
            notes = f"{notes}  ask pending".strip()
        share = usage["used"] / usage["line"] if usage["line"] else 1.0
        colour = "red" if share > 1 else "yellow" if share > 0.8 else "green"
        bar = style(usage_bar(usage["used"], usage["line"]), colour)
        rows.append([t["id"], t["status"], bar, cost_text(t["costs"]), style(notes, "yellow")])
    text = table(["THREAD", "STATUS", "USAGE AGAINST THE LINE", "COST", ""], rows, style)
    emit(args, data, text or "no threads")
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


def follow_turn(client: DaemonClient, thread: str, after: int, args: argparse.Namespace) -> int:
    """Follow a turn (``condensate.cli.follow``) with the async client on the same daemon."""
    async_client = AsyncDaemonClient(client.url, client.token)
    return anyio.run(follow.follow_turn, async_client, thread, after, args.json)


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    client = DaemonClient.find(settings)
    body = {
        **({"engine": args.engine} if args.engine else {}),
        "model": args.model,
        "cwd": str(Path(args.cwd).resolve()),
        "brief": args.brief,
        "persona": args.persona,
        "head": args.head,
        "permissions": args.permissions,
    }
    thread = client.call("POST", "/threads", body)
    if args.detach:
        emit(args, thread, thread["id"])
        return 0
    sys.stderr.write(f"thread {thread['id']}\n")
    return follow_turn(client, thread["id"], 0, args)


def cmd_ui(settings: Settings, args: argparse.Namespace) -> int:
    """The status page's address, its token in the fragment (never sent to the daemon);
    ``--open`` opens it in a browser."""
    client = DaemonClient.find(settings)
    client.call("GET", "/health")  # a daemon that is not up says so here, not in the browser
    url = status_page_url(client.url, client.token)
    emit(args, {"url": url}, url)
    if args.open:
        webbrowser.open(url)
    return 0


def cmd_chat(settings: Settings, args: argparse.Namespace) -> int:
    """Talk to a thread (``chat``)."""
    return chat(DaemonClient.find(settings), args)


def cmd_send(settings: Settings, args: argparse.Namespace) -> int:
    """Steer a thread (``POST /threads/:id/messages``); with ``--wait``, follow the turn that
    takes the message up until it ends."""
    client = DaemonClient.find(settings)
    sent = client.call(
        "POST", f"/threads/{args.thread}/messages", {"text": args.text, "pinned": args.pin}
    )
    if not args.wait:
        emit(args, sent, f"sent as seq {sent['seq']}")
        return 0
    return follow_turn(client, args.thread, sent["seq"], args)


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
