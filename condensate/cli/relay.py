"""The wrapper's relay: a person's own CLI reaches the daemon's gateway through a loopback
port of the wrapper's own, so that a daemon that is down answers as a provider would.

Every request is passed on to the daemon as it came and its reply streamed back as it comes.
When the daemon cannot be reached (it died, it restarts), the CLI gets an error in its
provider's own shape with ``x-should-retry: false`` (the official SDKs, which the CLIs use,
then show it at once instead of retrying for minutes): a sentence saying that Condensate's
daemon is down and how to start it. The session is taken up again once it runs: the pass in
the base URL is good across a restart.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from condensate.gateway.dialects import APIS, dialect

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "host", "content-length"}
)
DOWN = (
    "Condensate's daemon at {url} is not running, so this request was not sent: start it "
    "(condensate serve, or your service manager) and send your message again; the session "
    "is managed again from there."
)


@dataclass
class Relay:
    """A loopback HTTP server in a thread of its own that passes every request on to
    ``target`` (the daemon's URL)."""

    target: str
    url: str = ""
    _loop: asyncio.AbstractEventLoop | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    _stop: asyncio.Event | None = None
    _thread: threading.Thread | None = None
    _failed: BaseException | None = None

    def start(self) -> str:
        """Serve, and return the relay's URL (``http://127.0.0.1:PORT``)."""
        self._thread = threading.Thread(target=self._run, name="condensate-relay", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._failed is not None or not self.url:
            msg = f"The wrapper's relay did not start: {self._failed!r}"
            raise RuntimeError(msg)
        return self.url

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # said by start(); the thread ends
            self._failed = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        async with aiohttp.ClientSession(
            timeout=timeout, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar()
        ) as session:
            app = web.Application(client_max_size=1 << 40)
            app.router.add_route("*", "/{tail:.*}", functools.partial(self._pass_on, session))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            self.url = f"http://127.0.0.1:{port}"
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                await runner.cleanup()

    async def _pass_on(
        self, session: aiohttp.ClientSession, request: web.Request
    ) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read()
        try:
            async with session.request(
                request.method,
                f"{self.target}{request.rel_url}",
                data=body,
                headers=headers,
            ) as upstream:
                reply = web.StreamResponse(
                    status=upstream.status,
                    headers={
                        k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP
                    },
                )
                await reply.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await reply.write(chunk)
                await reply.write_eof()
                return reply
        except aiohttp.ClientConnectorError:
            return self._down(request)

    def _down(self, request: web.Request) -> web.Response:
        """The provider's own error shape, not to be retried, saying the daemon is down."""
        parts = request.path.split("/")
        api = parts[2] if len(parts) > 2 and parts[1] == "gateway" else ""
        message = DOWN.format(url=self.target)
        if api not in APIS:
            return web.json_response({"error": "daemon-down", "detail": message}, status=503)
        body = dialect("anthropic" if api == "anthropic" else "openai").error_body(
            503, "daemon-down", message
        )
        return web.json_response(body, status=503, headers={"x-should-retry": "false"})
