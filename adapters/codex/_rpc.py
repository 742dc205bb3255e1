"""``codex app-server`` as a JSON-RPC peer over stdio: one JSON object a line, JSON-RPC 2.0
without the ``"jsonrpc"`` field.

There is one reader and no background task: a request reads lines until its response, keeping
the notifications it passes in order for ``next_notification``, which the engine calls while
a turn runs. Requests from the server: an approval goes to ``approver`` when the engine set
one (a thread with ``permissions: "ask"``; the reader waits for the operator's answer, as
Codex does), and is declined otherwise; anything else is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from adapters import _child
from condensate.errors import CondensateError

log = structlog.get_logger()

CLIENT = {"name": "condensate", "title": "Condensate", "version": "0.1"}
REQUEST_TIMEOUT_SECONDS = 60.0


class AppServerError(CondensateError):
    """The app-server answered a request with an error."""


class AppServerExited(AppServerError):
    """The app-server's stdout closed: the process exited."""


Approver = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""Whether a server's approval request (its method and params) is accepted."""


class AppServer:
    """One running ``codex app-server``."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.waiting: deque[dict[str, Any]] = deque()
        """Notifications read while waiting for a response, not yet handed out."""
        self._next_id = 0
        self.approver: Approver | None = None
        """Answers approval requests (``ask``); None declines them."""

    @property
    def pid(self) -> int:
        return self.process.pid

    async def initialize(self) -> dict[str, Any]:
        result = await self.request(
            "initialize", {"clientInfo": CLIENT, "capabilities": {"experimentalApi": True}}
        )
        await self._write({"method": "initialized"})
        return result

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read until its result; an error response raises, and so does
        the process exiting first."""
        self._next_id += 1
        number = self._next_id
        await self._write({"id": number, "method": method, "params": params})
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                while True:
                    message = await self._read()
                    if message.get("id") == number and "method" not in message:
                        break
                    if "method" in message and "id" not in message:
                        self.waiting.append(message)
        except TimeoutError as exc:
            msg = f"codex app-server did not answer {method} within {REQUEST_TIMEOUT_SECONDS} s"
            raise AppServerError(msg) from exc
        if "error" in message:
            error = message["error"] or {}
            msg = f"codex app-server refused {method}: {error.get('message', error)}"
            raise AppServerError(msg)
        result: dict[str, Any] = message.get("result") or {}
        return result

    async def send(self, method: str, params: dict[str, Any]) -> None:
        """Send a request without reading its answer: for a request made while another task
        reads (an interrupt during a turn); ``next_notification`` passes its answer by."""
        self._next_id += 1
        await self._write({"id": self._next_id, "method": method, "params": params})

    async def next_notification(self) -> dict[str, Any]:
        """The next notification; raises ``AppServerExited`` once the process has exited."""
        if self.waiting:
            return self.waiting.popleft()
        while True:
            message = await self._read()
            if "method" in message and "id" not in message:
                return message

    def drain(self) -> list[dict[str, Any]]:
        """The notifications read and not handed out (between turns, nobody wants them)."""
        drained = list(self.waiting)
        self.waiting.clear()
        return drained

    async def close(self) -> None:
        await _child.stop(self.process)

    async def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            await self.process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError, RuntimeError) as exc:
            # uvloop: a write to a pipe already closed is a RuntimeError
            msg = f"codex app-server (pid {self.pid}) closed its input"
            raise AppServerExited(msg) from exc

    async def _read(self) -> dict[str, Any]:
        """The next JSON object the server writes, after answering any request it makes."""
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            raw = await stdout.readline()
            if not raw:
                msg = f"codex app-server (pid {self.pid}) exited"
                raise AppServerExited(msg)
            try:
                message = json.loads(raw)
            except ValueError:
                log.info("codex_plain_line", pid=self.pid, line=raw[:300].decode())
                continue
            if not isinstance(message, dict):
                continue
            if "method" in message and "id" in message:
                await self._answer(str(message["method"]), message["id"], message)
                continue
            return message

    async def _answer(self, method: str, number: Any, message: dict[str, Any]) -> None:
        approval = (
            method.endswith("/requestApproval") and method != "item/permissions/requestApproval"
        )
        if approval and self.approver is not None:
            accepted = await self.approver(method, message.get("params") or {})
            await self._write(
                {"id": number, "result": {"decision": "accept" if accepted else "decline"}}
            )
            return
        await self._decline(method, number)

    async def _decline(self, method: str, number: Any) -> None:
        log.warning("codex_server_request_declined", method=method)
        reply: dict[str, Any] = {"id": number}
        if method.endswith("requestApproval"):
            reply["result"] = {"decision": "decline"}
        else:
            reply["error"] = {"code": -32601, "message": f"Condensate does not answer {method}"}
        await self._write(reply)
