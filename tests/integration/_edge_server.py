"""A bare edge for tests: ``condensate.http.edge.accept_forever`` in front of a one-route aiohttp
app, in its own process under a low file limit, so that ``accept`` runs out of descriptors
(the cap is set above what the limit allows).

``python -m tests.integration._edge_server LIMIT CAP`` prints its port, then serves
``GET /ping`` and ``GET /slow`` (answered after 2 s) until killed; its log goes to stderr as
JSON.
"""

from __future__ import annotations

import resource
import socket
import sys

import anyio
from aiohttp import web

from condensate.http import edge
from condensate.logs import configure_logging


async def ping(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def slow(request: web.Request) -> web.Response:
    await anyio.sleep(2.0)
    return web.json_response({"ok": True})


async def main(limit: int, cap: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    configure_logging("json")
    gate = edge.Gate(cap)
    app = web.Application(middlewares=[gate.middleware])
    app.router.add_get("/ping", ping)
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    gate.server = runner.server
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    sys.stdout.write(f"{listener.getsockname()[1]}\n")
    sys.stdout.flush()
    await edge.accept_forever(listener, gate)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]), int(sys.argv[2]))
