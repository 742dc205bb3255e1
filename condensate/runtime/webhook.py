"""The operator's usage stream as a webhook (``CONDENSATE_USAGE_WEBHOOK``): after each model
call the daemon POSTs the thread's usage as JSON, so a dashboard need not poll. An edge: the
runtime offers each report without waiting; one sender posts them in order, each within a few
seconds; a report that cannot be sent (the receiver down, slow or answering an error) is
logged and dropped, and when the receiver falls far behind the oldest reports go first. No
receiver can slow a thread down or stop the daemon.
"""

from __future__ import annotations

import contextlib
from typing import Any

import aiohttp
import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

log = structlog.get_logger()

BACKLOG = 1_000
"""Reports kept while the receiver is behind."""
POST_SECONDS = 5.0


class UsageWebhook:
    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url
        self.session = session
        self._send: MemoryObjectSendStream[dict[str, Any]]
        self._receive: MemoryObjectReceiveStream[dict[str, Any]]
        self._send, self._receive = anyio.create_memory_object_stream[dict[str, Any]](BACKLOG)
        self.dropped = 0

    def offer(self, report: dict[str, Any]) -> None:
        """Queue ``report`` without waiting; with the backlog full, the oldest goes."""
        try:
            self._send.send_nowait(report)
        except anyio.WouldBlock:
            with contextlib.suppress(anyio.WouldBlock):
                self._receive.receive_nowait()
            self.dropped += 1
            log.warning("usage_webhook_behind", url=self.url, dropped=self.dropped)
            self._send.send_nowait(report)

    async def run(self) -> None:
        """Post every report, in order, for as long as the daemon runs."""
        async for report in self._receive:
            try:
                with anyio.fail_after(POST_SECONDS):
                    async with self.session.post(self.url, json=report) as answer:
                        if answer.status >= 400:
                            log.warning("usage_webhook_refused", url=self.url, status=answer.status)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                log.warning(
                    "usage_webhook_failed", url=self.url, error=str(exc) or type(exc).__name__
                )
