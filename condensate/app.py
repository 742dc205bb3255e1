"""The composition root: settings, the log, providers, the curator, the runtime, the engines
(those installed, found through ``condensate.engines``), the metrics and the HTTP server,
wired once; and the daemon's lifecycle (readiness, SIGTERM).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import secrets
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import aiohttp
import anyio
import structlog
from aiohttp import web
from anyio.abc import TaskGroup

from condensate import statedir
from condensate.config import read_settings
from condensate.core.meter import ModelWindow
from condensate.engine import Engines, EngineSettings
from condensate.engine.registry import installed, setting_warnings
from condensate.errors import ConfigError, TemporaryFailure
from condensate.eventlog import EventStore
from condensate.eventlog.postgres import Owner, PostgresStore, where
from condensate.eventlog.sqlite import SqliteStore
from condensate.gateway import Gateway, Passes, Upstream
from condensate.http import edge
from condensate.http.middleware import Guard, Readiness
from condensate.http.server import make_app
from condensate.providers import ModelClient, ProviderSettings, make_client, parse_model
from condensate.providers._http import CallObserver
from condensate.providers.windows import resolve_window
from condensate.runtime import Runtime
from condensate.runtime.curator import Curator
from condensate.runtime.fleet import Fleet, daemon_id
from condensate.runtime.metrics import Metrics
from condensate.runtime.recovery import recover
from condensate.runtime.webhook import UsageWebhook
from condensate.settings import Settings

log = structlog.get_logger()

SHUTDOWN_SECONDS = 3.0
"""How long a stopping daemon lets requests in flight (a gateway stream) finish."""
TOKEN_FILE = "token"  # noqa: S105 - a file name, not a secret
DAEMON_FILE = statedir.DAEMON_FILE
PR_SET_DUMPABLE = 4


def engine_checks() -> dict[str, str]:
    """Each installed engine's binary and version, when it runs one, or why it cannot run."""
    found: dict[str, str] = {}
    for name, info in sorted(installed().items()):
        if info.check is None:
            continue
        try:
            found[name] = info.check(read_settings(info.settings))
        except ConfigError as exc:
            found[name] = f"unavailable: {exc}"
    return found


def ensure_token(home: Path) -> str:
    """The bearer token, written at first start with mode 0600 and kept after."""
    home.mkdir(parents=True, exist_ok=True, mode=statedir.DIR_MODE)
    path = home / TOKEN_FILE
    if path.exists():
        return path.read_text().strip()
    token = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, statedir.FILE_MODE)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    return token


def allowed_hosts(settings: Settings, port: int) -> frozenset[str]:
    names = {settings.host, "127.0.0.1", "localhost", *settings.allowed_hosts}
    if settings.host in ("0.0.0.0", "::"):  # noqa: S104 - compared, not bound
        names.discard(settings.host)
    return frozenset({n.lower() for n in names} | {f"{n.lower()}:{port}" for n in names})


def notify_systemd(settings: Settings, state: str) -> None:
    """sd_notify without libsystemd: one datagram to $NOTIFY_SOCKET, when systemd set it."""
    address = settings.notify_socket
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(state.encode())


@dataclass
class Daemon:
    """A running daemon: its runtime, the URL it serves and its token."""

    runtime: Runtime
    url: str
    token: str


@asynccontextmanager
async def running(
    settings: Settings,
    engines: Engines | None = None,
    engine_settings: Mapping[str, EngineSettings] | None = None,
) -> AsyncIterator[Daemon]:
    """Start everything, recover the threads, serve; stop cleanly on exit. The daemon runs
    ``engines`` (default: every engine installed), each with its settings from
    ``engine_settings`` or else the environment. With the state directory's lock taken, the
    engines' per-thread CLI directories from before are removed."""
    lock = statedir.hold(settings.home)
    run = installed() if engines is None else engines
    try:
        statedir.clear_thread_dirs(
            settings.home, [e.thread_dirs for e in run.values() if e.thread_dirs]
        )
        async with _running(settings, run, engine_settings) as daemon:
            yield daemon
    finally:
        os.close(lock)


async def open_store(settings: Settings) -> EventStore:
    """The event log the settings name, to read it (and, outside a daemon, write it):
    PostgreSQL at ``CONDENSATE_DATABASE_URL``, else the SQLite file in the state directory."""
    if settings.database_url:
        return await PostgresStore.connect(settings.database_url)
    return SqliteStore.open(settings.db_path)


async def _log_and_fleet(settings: Settings, url: str) -> tuple[EventStore, Fleet | None]:
    """The event log, and on PostgreSQL the fleet this daemon (at ``url``) joins."""
    if not settings.database_url:
        return await open_store(settings), None
    name = settings.daemon_id or daemon_id(str(settings.home))
    owner = Owner(name, url, settings.lease_seconds)
    store = await PostgresStore.connect(settings.database_url, owner)
    return store, Fleet(store, owner.name, owner.url, owner.seconds)


def _usage_webhook(
    settings: Settings, session: aiohttp.ClientSession, runtime: Runtime
) -> UsageWebhook | None:
    """The usage stream's webhook, when the settings name one: the runtime reports to it."""
    if not settings.usage_webhook:
        return None
    webhook = UsageWebhook(settings.usage_webhook, session)
    runtime.usage_sink = webhook.offer
    return webhook


async def _take_up(
    runtime: Runtime, fleet: Fleet | None, tasks: TaskGroup, webhook: UsageWebhook | None
) -> None:
    """Recover the threads in the log (in a fleet, those this daemon can claim), keep the
    fleet's leases and post the usage stream for as long as the daemon runs."""
    if webhook is not None:
        tasks.start_soon(webhook.run, name="usage webhook")
    if fleet is None:
        await recover(runtime)
        return
    await recover(runtime, claim=fleet.claim)
    tasks.start_soon(fleet.keep, runtime, name="fleet leases")
    tasks.start_soon(fleet.listen, name="fleet notify")


def _clients(
    providers: ProviderSettings, session: aiohttp.ClientSession, observer: CallObserver
) -> Callable[[str], ModelClient]:
    """A client per model (made once), its calls told to ``observer``."""
    clients: dict[str, ModelClient] = {}

    def client_for(model: str) -> ModelClient:
        if model not in clients:
            clients[model] = make_client(model, providers, session, observer)
        return clients[model]

    return client_for


def _windows(
    settings: Settings, providers: ProviderSettings, session: aiohttp.ClientSession
) -> Callable[[str], Awaitable[ModelWindow]]:
    """Each model's window."""

    async def window_for(model: str) -> ModelWindow:
        name = parse_model(model)
        return await resolve_window(
            session, name, providers.endpoint(name.provider), settings.model_windows
        )

    return window_for


def _runtime(
    settings: Settings,
    event_log: EventStore,
    run: Engines,
    engine_settings: Mapping[str, EngineSettings] | None,
    session: aiohttp.ClientSession,
) -> Runtime:
    """The runtime with its curator and model clients, each client's calls told to the
    daemon's metrics (as ``native`` or ``curator`` calls)."""
    providers = settings.providers()
    metrics = Metrics()
    curator_for = _clients(providers, session, metrics.calls("curator"))
    return Runtime(
        settings,
        event_log,
        run,
        Curator(settings.curator(), curator_for, session),
        _clients(providers, session, metrics.calls("native")),
        _windows(settings, providers, session),
        engine_settings=engine_settings,
        metrics=metrics,
    )


def log_name(settings: Settings) -> str:
    """Where the settings' event log is, as messages name it (no password)."""
    return where(settings.database_url) if settings.database_url else str(settings.db_path)


@asynccontextmanager
async def _running(
    settings: Settings, run: Engines, engine_settings: Mapping[str, EngineSettings] | None
) -> AsyncIterator[Daemon]:
    statedir.prepare(settings.home)
    file_limit = edge.raise_file_limit()
    token = ensure_token(settings.home)
    # Bound before recovery so that engines (a head's MCP tools) know the API's address.
    # Served during it, so that /health and /ready answer; every other call waits until it
    # is done (``Readiness``), so that none finds a thread not yet recovered.
    listener = _listen(settings.host, settings.port)
    port = int(listener.getsockname()[1])
    url = f"http://{settings.host}:{port}"
    try:
        event_log, fleet = await _log_and_fleet(settings, url)
    except BaseException:
        listener.close()
        raise
    # The gateway's own session: it keeps no cookies (a provider's belong to the CLI that
    # got them, and pass back to it) and leaves bodies as they came.
    async with (
        aiohttp.ClientSession() as session,
        aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False) as relay,
    ):
        runtime = _runtime(settings, event_log, run, engine_settings, session)
        observer = runtime.metrics.calls("gateway")
        gateway = Gateway(
            upstream(settings),
            runtime,
            relay,
            admitter=runtime,
            observer=observer,
            passes=Passes.of_token(token),
        )
        runner: web.AppRunner | None = None
        webhook = _usage_webhook(settings, session, runtime)
        runtime.fleet = fleet
        runtime.daemon_url = _loopback_url(settings.host, port)
        runtime.daemon_token = token
        runtime.gateway_for = partial(gateway.access, runtime.daemon_url)
        readiness = Readiness("recovering")
        try:
            async with anyio.create_task_group() as tasks:
                runtime.bind(tasks)
                guard = Guard(token, allowed_hosts(settings, port))
                gate = edge.Gate(edge.connection_cap(file_limit))
                app = make_app(
                    runtime, guard, edge=[gate.middleware], gateway=gateway, readiness=readiness
                )
                runner = await _serve(app, gate, listener, tasks)
                statedir.write_private(
                    settings.home / DAEMON_FILE, json.dumps({"url": url, "pid": os.getpid()})
                )
                await _take_up(runtime, fleet, tasks, webhook)
                readiness.become("ready")
                log.info(
                    "daemon_ready",
                    url=url,
                    status_page=f"{url}/ui (condensate ui opens it with the token)",
                    db=log_name(settings),
                    fleet=None if fleet is None else fleet.me,
                )
                notify_systemd(settings, "READY=1")
                try:
                    yield Daemon(runtime, url, token)
                finally:
                    readiness.become("stopping")
                    notify_systemd(settings, "STOPPING=1")
                    tasks.cancel_scope.cancel()
        finally:
            await _let_go(runtime, fleet)
            if runner is not None:
                await runner.cleanup()
            listener.close()
            await event_log.close()
            log.info("daemon_stopped")


async def _serve(
    app: web.Application, gate: edge.Gate, listener: socket.socket, tasks: TaskGroup
) -> web.AppRunner:
    """Serve ``app`` on ``listener`` through ``gate``, accepting in ``tasks``."""
    runner = web.AppRunner(app, shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    gate.server = runner.server
    tasks.start_soon(edge.accept_forever, listener, gate, name="accept")
    return runner


async def _let_go(runtime: Runtime, fleet: Fleet | None) -> None:
    """The live streams end and the engines' CLIs end (their gateway requests with them), so
    that the server's cleanup need not wait for them; in a fleet the leases go, for others
    to take over at once."""
    runtime.live.close()
    for thread in runtime.threads.values():
        await thread.engine.close()
    if fleet is not None:
        await fleet.release()


def upstream(settings: Settings) -> Upstream:
    """Where the gateway forwards the CLIs' requests, with the daemon's own credentials."""
    return Upstream(
        anthropic_base_url=settings.anthropic_base_url,
        anthropic_api_key=settings.anthropic_api_key,
        anthropic_auth_token=settings.anthropic_auth_token,
        openai_base_url=settings.openai_base_url,
        openai_api_key=settings.openai_api_key,
        chatgpt_base_url=settings.chatgpt_base_url,
        read_timeout_s=settings.provider_read_timeout_s,
    )


def _listen(host: str, port: int) -> socket.socket:
    """A bound, listening socket (``port`` 0 picks a free one). A port another process holds,
    or an address not (yet) up, is a ``TemporaryFailure``; any other refusal (a privileged
    port, a host that is no address) a ``ConfigError``; each names its setting."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            msg = (
                f"Port {port} on {host} is in use by another process; stop it, or set "
                "CONDENSATE_PORT to a free port (0 picks one)."
            )
            raise TemporaryFailure(msg) from exc
        if exc.errno == errno.EADDRNOTAVAIL:
            msg = (
                f"The address {host} is not one of this machine's (or not up yet); set "
                "CONDENSATE_HOST to one of its addresses."
            )
            raise TemporaryFailure(msg) from exc
        msg = (
            f"Cannot listen on {host} port {port}: {exc.strerror or exc}; check "
            "CONDENSATE_HOST and CONDENSATE_PORT."
        )
        raise ConfigError(msg) from exc


def _loopback_url(host: str, port: int) -> str:
    """Where local tools reach the API: the bound address, or loopback for a wildcard."""
    if host in ("0.0.0.0", "::"):  # noqa: S104 - compared, not bound
        host = "127.0.0.1"  # a dual-stack "::" accepts IPv4 too
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def keep_environment_private() -> None:
    """Make the daemon's process not dumpable: its ``/proc/<pid>/environ`` (provider keys, the
    token's neighbours) becomes unreadable to other processes of the same non-root user, the
    commands its agents run among them. Children are dumpable again after exec. Linux only;
    elsewhere, and if the call fails, nothing changes."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        log.info("environment_not_hidden", reason="prctl unavailable")


async def serve(settings: Settings) -> None:
    """``condensate serve``: run until SIGTERM or SIGINT."""
    keep_environment_private()
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with running(settings):
            for text in setting_warnings(settings, installed()):
                # Said once it serves: a thread that would fail with 401 is a setting away.
                log.warning("setting_warning", detail=text)
            async for received in signals:
                log.info("daemon_stopping", signal=signal.Signals(received).name)
                break
