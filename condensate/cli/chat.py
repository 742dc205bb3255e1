"""``condensate chat``: talk to a thread.

On a terminal it is a prompt_toolkit prompt over the thread's live stream
(``condensate.cli.chat_tty``): replies as Markdown, a progress line while the model works,
typing during a turn sent as a steer, approvals answered at the prompt. Piped, it reads one
message a line from stdin and follows each turn as ``run`` does (JSON lines with ``--json``;
a failed turn's reason on stderr), and exits as the last turn ended (1 when it failed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

from condensate.cli.follow import one_turn
from condensate.client import AsyncDaemonClient, DaemonClient, DaemonError


def new_thread_body(args: argparse.Namespace, brief: str) -> dict[str, object]:
    return {
        **({"engine": args.engine} if args.engine else {}),
        "model": args.model,
        "cwd": str(Path(args.cwd).resolve()),
        "brief": brief,
        "permissions": args.permissions,
    }


def chat(client: DaemonClient, args: argparse.Namespace) -> int:
    """The chat: interactive on a terminal, one message a line when piped."""
    if args.thread is None and args.model is None:
        msg = "chat needs a THREAD, or --model to start a new one with your first message."
        raise DaemonError(code="usage", detail=msg)
    if args.thread is not None:
        client.thread(args.thread)  # a thread the daemon does not have fails here, named (404)
    async_client = AsyncDaemonClient(client.url, client.token)
    if sys.stdin.isatty() and sys.stdout.isatty() and not args.json:
        from condensate.cli.chat_tty import interactive  # noqa: PLC0415 - only on a terminal

        return anyio.run(
            interactive, async_client, args.thread, lambda brief: new_thread_body(args, brief)
        )
    return anyio.run(_piped, async_client, args.thread, args)


async def _piped(client: AsyncDaemonClient, thread: str | None, args: argparse.Namespace) -> int:
    status = 0
    async with client:
        while True:
            raw = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not raw:
                return status
            text = raw.rstrip("\n")
            if not text.strip():
                continue
            if thread is None:
                thread = str(
                    (await client.call("POST", "/threads", new_thread_body(args, text)))["id"]
                )
                after = 0
            else:
                sent = await client.call("POST", f"/threads/{thread}/messages", {"text": text})
                after = int(sent["seq"]) - 1  # its own line first, as `run` shows the brief
            status = await one_turn(client, thread, after, args.json, usage=False)
            if status == 130:
                return status
