"""A runtime in process for tests: a real SQLite log under ``home``, the real engines (or the
given ones), the fake model server over HTTP for every provider, the model gateway on a
loopback port of its own (the CLI engines reach the fake through it, as under a daemon), the
runtime's task group, and the metrics wired as a daemon wires them; optionally recovered from
what a previous daemon left in ``home``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import anyio
from aiohttp import web

from condensate.app import open_store, upstream
from condensate.core.meter import ModelWindow
from condensate.runtime.curator import Curator
from condensate.engine import Engines, EngineSettings
from condensate.engine.registry import installed
from condensate.eventlog import EventStore
from condensate.gateway import Gateway
from condensate.runtime.metrics import Metrics
from condensate.providers import ModelClient, make_client
from condensate.runtime.recovery import recover
from condensate.runtime import Runtime
from condensate.settings import Settings
from condensate.testing.fake_model import FakeModelServer

ClientWrap = Callable[[ModelClient], ModelClient]


@asynccontextmanager
async def runtime_on(
    home: Path,
    fake: FakeModelServer,
    *,
    recovered: bool = False,
    engines: Engines | None = None,
    engine_settings: Mapping[str, EngineSettings] | None = None,
    wrap: ClientWrap | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> AsyncIterator[Runtime]:
    """A context manager, not a fixture: a task group must be left in the task that entered
    it. ``wrap`` may rewrite what each model client returns; ``overrides`` are settings set
    on top of the fake's."""
    async with aiohttp.ClientSession() as session:
        settings = Settings(
            home=home,
            anthropic_base_url=fake.url,
            anthropic_api_key="k",
            openai_base_url=fake.url + "/v1",
            openai_api_key="k",
            chat_base_url=fake.url + "/v1",
            **(overrides or {}),
        )
        providers = settings.providers()
        metrics = Metrics()
        native = metrics.calls("native")

        def client_for(model: str) -> ModelClient:
            client = make_client(model, providers, session, native)
            return client if wrap is None else wrap(client)

        async def window_for(model: str) -> ModelWindow:
            return ModelWindow(200_000, resolved=True)

        async with _opened(settings) as log:
            curator = Curator(settings.curator(), client_for)
            runtime = Runtime(
                settings,
                log,
                installed() if engines is None else engines,
                curator,
                client_for,
                window_for,
                engine_settings=engine_settings,
                metrics=metrics,
            )
            observer = metrics.calls("gateway")
            gateway = Gateway(
                upstream(settings), runtime, session, admitter=runtime, observer=observer
            )
            app = web.Application()
            gateway.add_routes(app)
            runner = web.AppRunner(app, shutdown_timeout=1.0)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            runtime.gateway_for = partial(gateway.access, f"http://127.0.0.1:{port}")
            try:
                async with anyio.create_task_group() as tasks:
                    runtime.bind(tasks)
                    if recovered:
                        await recover(runtime)
                    yield runtime
                    tasks.cancel_scope.cancel()
            finally:
                # The CLIs first: an idle one would otherwise live until pytest exits.
                with anyio.CancelScope(shield=True):
                    for thread in runtime.threads.values():
                        await thread.engine.close()
                    await runner.cleanup()


@asynccontextmanager
async def _opened(settings: Settings) -> AsyncIterator[EventStore]:
    """The event log the settings name (SQLite in ``home``, or ``database_url``)."""
    store = await open_store(settings)
    try:
        yield store
    finally:
        await store.close()
