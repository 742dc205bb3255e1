"""The daemon's HTTP API on aiohttp: parse, call the runtime, serialize.

Every call but ``/health``, ``/ready`` and the status page's files (``/metrics`` included)
needs the bearer token from the state directory; until the daemon is ready (its threads
recovered) every call but those probes and ``/metrics`` waits; a request whose
Host is not the bound address (or a configured name) is refused; bodies are capped, must be
``application/json`` in UTF-8 with integers within 64 bits, and a message (or a brief) that
alone passes the thread's line is refused. Every error is ``{"error": code, "detail":
sentence}``, built in one middleware, an unexpected exception included (500 internal-error).
Another, outside it, times each API request by its declared route for the metrics.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from condensate import __version__, api
from condensate.api import (
    INT64_MAX,
    ApprovalAnswer,
    Attach,
    CompactAnswer,
    CreateThread,
    Detach,
    Interrupt,
    PinMessage,
    SendMessage,
    openapi_document,
)
from condensate.api.bodies import BODY_TIMEOUT
from condensate.core import ceilings
from condensate.core.ceilings import CeilingSettings
from condensate.core.context_tools import ANSWERED_TOOLS, CONDENSE, CONTEXT_USAGE, PIN
from condensate.core.projector import Bill, Projection
from condensate.core.tokens import counter_for
from condensate.engine import ThreadSpec
from condensate.errors import ConfigError, Refused
from condensate.eventlog import DEFAULT_LIMIT, Lease, archive
from condensate.events import ResetPolicy, now_utc
from condensate.gateway import Gateway
from condensate.http import live_routes, ui
from condensate.http.middleware import (
    BY_THREAD,
    GUARD,
    MAX_BODY,
    READINESS,
    READY_RETRY_SECONDS,
    RUNTIME,
    Guard,
    Handler,
    Readiness,
    answer,
    error,
    errors_middleware,
    guard_middleware,
    readiness_middleware,
    status_of,
    timing_middleware,
)
from condensate.providers import billed_model, parse_model
from condensate.runtime import Runtime, approvals, asks, tool_answers
from condensate.runtime.archiving import archive_held
from condensate.runtime.metrics import TEXT_FORMAT
from condensate.runtime.thread import Thread
from condensate.runtime.turn_context import RuntimeTurn

log = structlog.get_logger()

MAX_WAIT = 30.0


INT64 = range(-INT64_MAX - 1, INT64_MAX + 1)


def _int64(text: str) -> int:
    # Length first: int() of a 5,000-digit string is refused by Python itself, and slowly.
    value = int(text) if len(text.lstrip("-")) <= 19 else None
    if value is None or value not in INT64:
        raise Refused(
            code="integer-out-of-range",
            detail=f"The body holds an integer of {len(text.lstrip('-'))} digits that does not "
            "fit in 64 bits.",
        )
    return value


def _no_constant(name: str) -> None:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


async def _json(request: web.Request, *, optional: bool = False) -> Any:
    """The body as JSON: ``application/json``, UTF-8, read within the body timeout, integers
    within 64 bits. An ``optional`` body may be absent (then ``{}``)."""
    if request.content_type != "application/json" and not (optional and not request.body_exists):
        raise Refused(
            code="unsupported-media-type",
            detail=f"The body must be application/json, not {request.content_type!r}.",
        )
    try:
        with anyio.fail_after(BODY_TIMEOUT):
            raw = await request.read()
    except TimeoutError as exc:
        raise Refused(
            code="body-timeout",
            detail=f"The body did not arrive within {BODY_TIMEOUT:g} s.",
        ) from exc
    if optional and not raw:
        return {}
    try:
        return json.loads(raw.decode(), parse_int=_int64, parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise Refused(
            code="malformed-json", detail=f"The body is not UTF-8: byte {exc.start} is not."
        ) from exc
    except json.JSONDecodeError as exc:
        raise Refused(
            code="malformed-json", detail=f"The body is not valid JSON: {exc.msg} at {exc.pos}."
        ) from exc
    except RecursionError as exc:
        raise Refused(code="malformed-json", detail="The body's JSON nests too deep.") from exc
    except ValueError as exc:
        raise Refused(code="malformed-json", detail=f"The body is not valid JSON: {exc}.") from exc


async def _thread(request: web.Request) -> Thread:
    """The thread the path names, when this daemon owns it; in a fleet, a thread another
    daemon owns is refused with 409 naming that daemon."""
    runtime = request.app[RUNTIME]
    thread_id = request.match_info["thread_id"]
    thread = runtime.threads.get(thread_id)
    if thread is not None:
        return thread
    lease = await _elsewhere(runtime, thread_id)
    if lease is not None and lease.owner == UNOWNED:
        raise Refused(
            code="thread-changing-hands",
            detail=f"Thread {thread_id!r} has no daemon right now (its owner stopped or "
            "died); a daemon of the fleet takes it over within a third of a lease. Retry then.",
        )
    if lease is not None:
        raise Refused(
            code="thread-owned-elsewhere",
            detail=f"Thread {thread_id!r} is owned by daemon {lease.owner} at {lease.url}; "
            "send this there.",
        )
    return runtime.get(thread_id)


UNOWNED = ""
"""The owner of a thread of the log that no daemon holds right now (between two owners)."""


async def _elsewhere(runtime: Runtime, thread_id: str) -> Lease | None:
    """In a fleet, where a thread of the log this daemon does not run is: the lease of the
    daemon that does, or an ``UNOWNED`` one while it changes hands (no live lease, or this
    daemon's own claim before its rebuild is done); None for a thread the log lacks."""
    if runtime.fleet is None or thread_id in runtime.threads:
        return None
    lease = await runtime.fleet.owner_of(thread_id)
    if lease is not None and lease.owner != runtime.fleet.me and lease.expires_at > now_utc():
        return lease
    if await runtime.log.last_seq(thread_id) == 0:
        return None
    return Lease(UNOWNED, UNOWNED, now_utc())


def _owned_elsewhere(thread_id: str, lease: Lease, events: int) -> api.ThreadElsewhere:
    """What any daemon of a fleet says of a thread another one owns (or none does)."""
    return api.ThreadElsewhere(
        id=thread_id,
        status="unowned" if lease.owner == UNOWNED else "elsewhere",
        owner=lease.owner,
        owner_url=lease.url,
        events=events,
    )


def _tokens(bill: Bill) -> api.Tokens:
    return api.Tokens(
        input=bill.input,
        cache_write=bill.cache_write,
        cache_read=bill.cache_read,
        output=bill.output,
        cache_write_1h=bill.cache_write_1h,
        compaction_input=bill.compaction_input,
        compaction_output=bill.compaction_output,
    )


def costs_answer(view: Projection) -> api.Costs:
    """What the provider billed for the thread, by token class, with the cost at list price
    (``usd`` is None while any call's model has no price), per session and model, each model
    named as the metrics name it (``billed_model``)."""
    total = Bill()
    by_session: dict[tuple[str, str], Bill] = {}
    for key, bill in sorted(view.billed.items()):
        session, _, called = key.partition("|")
        total.merge(bill)
        # Two ids of one model (a call the provider named by its snapshot, one it did not
        # name) are one model here.
        shown = (session, billed_model(called, view.model))
        by_session.setdefault(shown, Bill()).merge(bill)
    sessions = [
        api.SessionCosts(
            session=session,
            model=model,
            calls=bill.calls,
            tokens=_tokens(bill),
            usd=None if bill.unpriced else bill.usd,
        )
        for (session, model), bill in sorted(by_session.items())
    ]
    unpriced = {model for (_, model), bill in by_session.items() if bill.unpriced}
    return api.Costs(
        calls=total.calls,
        tokens=_tokens(total),
        usd=None if unpriced else total.usd,
        unpriced=sorted(unpriced),
        sessions=sessions,
        thinking_dropped=api.ThinkingDropped(
            blocks=total.thinking_dropped, tokens=total.thinking_dropped_tokens
        ),
    )


def thread_json(runtime: Runtime, thread: Thread) -> dict[str, Any]:
    """A thread as ``GET /threads`` gives it, for the live channel's ``/live`` stream."""
    return thread_answer(runtime, thread).dump()


def thread_answer(runtime: Runtime, thread: Thread) -> api.Thread:
    usage = runtime.usage(thread)
    view = thread.projection
    reset = thread.spec.reset
    return api.Thread(
        id=thread.thread_id,
        title=f"condensate {thread.spec.engine} (a terminal's session)"
        if thread.spec.attached
        else api.title_of(thread.spec.brief),
        engine=thread.spec.engine,
        model=thread.spec.model,
        cwd=thread.spec.cwd,
        head=thread.spec.head,
        parent=thread.spec.parent,
        status=thread.status,
        owner=None if runtime.fleet is None else runtime.fleet.me,
        events=view.last_seq,
        usage=api.Usage(**usage.as_json()),
        ceiling=usage.ceiling,
        line=usage.line,
        over_line=thread.over_line,
        costs=costs_answer(view),
        pending_ask=view.ask,
        children=sorted(view.unjoined),
        reset=None if reset is None else api.ResetState(**dict(reset), resets=view.resets),
    )


async def health(request: web.Request) -> web.Response:
    return answer(api.Health(ok=True, version=__version__))


async def ready(request: web.Request) -> web.Response:
    """200 once the daemon serves its threads; 503 ``not-ready``, saying why, before (while
    it recovers them) and after (while it stops)."""
    readiness = request.app[READINESS]
    if readiness.state == "ready":
        return answer(api.Ready(ready=True, version=__version__))
    refused = error(status_of("not-ready"), "not-ready", readiness.reason)
    refused.headers["Retry-After"] = str(READY_RETRY_SECONDS)
    return refused


async def metrics(request: web.Request) -> web.Response:
    """Every metric of the daemon, in the Prometheus text format."""
    body = request.app[RUNTIME].metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": TEXT_FORMAT})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document(list(request.app[RUNTIME].profiles)))


def _model(model: str) -> None:
    try:
        parse_model(model)
    except ConfigError as exc:
        raise Refused(code="unknown-model", detail=str(exc)) from exc


async def _within_line(text: str, model: str, line: int, what: str) -> None:
    """Refuse a message that alone would pass the thread's line: no window could make room."""
    counter = counter_for(model)
    tokens = await anyio.to_thread.run_sync(counter.count, text)
    if tokens > line:
        raise Refused(
            code="message-too-large",
            detail=f"The {what} is {tokens:,} tokens; this thread's line is {line:,} tokens.",
        )


def _new_line(settings: CeilingSettings, head: bool, window: int) -> int:
    """The line of a thread not yet started (its engine's baseline not counted)."""
    if head:
        return ceilings.head_line(window, settings)
    return ceilings.ordinary_line(ceilings.working_ceiling(window, settings), settings)


def _reset_policy(body: CreateThread) -> ResetPolicy | None:
    """The thread's agent-reset policy, its emergency model checked like the thread's."""
    if body.reset is None:
        return None
    if body.reset.emergency_model is not None:
        _model(body.reset.emergency_model)
    return ResetPolicy(
        warnings=tuple(body.reset.warnings),
        budget=body.reset.budget,
        emergency_model=body.reset.emergency_model,
    )


async def create_thread(request: web.Request) -> web.Response:
    body = CreateThread.model_validate(await _json(request))
    runtime = request.app[RUNTIME]
    engine = runtime.default_engine if body.engine is None else body.engine
    if engine not in runtime.profiles:
        known = ", ".join(repr(name) for name in sorted(runtime.profiles))
        detail = f"Field 'engine': {engine!r} is not an engine this daemon runs ({known})."
        raise Refused(code="invalid-body", detail=detail)
    profile = runtime.profiles[engine]
    _model(body.model)
    policy = _reset_policy(body)
    spec = ThreadSpec(
        engine=engine,
        model=body.model,
        cwd=body.cwd,
        brief=body.brief,
        persona=body.persona,
        tools=tuple(body.tools),
        permissions=body.permissions,
        head=body.head,
        reset=policy,
        output_cap=body.output_cap,
        near_limit_warnings=body.near_limit_warnings,
    )
    await runtime.refuse_unfit(spec)  # before the model's window is looked up
    window = await runtime.window_for(body.model)
    line = _new_line(profile.ceilings, body.head, window.tokens)
    await _within_line(body.brief, body.model, line, "brief")
    thread = await runtime.create(spec, window=window)
    return answer(thread_answer(runtime, thread), 201)


async def attach(request: web.Request) -> web.Response:
    """A thread for a CLI a person runs in their own terminal, and how to start it."""
    body = Attach.model_validate(await _json(request))
    runtime = request.app[RUNTIME]
    profile = runtime.profiles.get(body.engine)
    if profile is None or profile.info.launch is None:
        runs = sorted(n for n, p in runtime.profiles.items() if p.info.launch is not None)
        detail = f"Field 'engine': {body.engine!r} is not a CLI a person can run here ({runs})."
        raise Refused(code="invalid-body", detail=detail)
    model = profile.info.cli_model(body.args) if profile.info.cli_model else ""
    _model(model)
    spec = ThreadSpec(
        engine=body.engine,
        model=model,
        cwd=body.cwd,
        brief="",
        head=body.head,
        attached="managed" if body.manage else "costs",
        attached_pid=body.pid,
    )
    thread = await runtime.create(spec)
    # A launcher may run the CLI once (Codex lists its models): off the event loop.
    attachment = runtime.attachment(thread)
    launch = await anyio.to_thread.run_sync(
        profile.info.launch, profile.settings, attachment.url, body.manage, runtime.settings.home
    )
    answer_launch = api.Launch(
        binary=launch.binary,
        args=list(launch.args),
        env=dict(launch.env),
        logins=list(launch.logins),
        key_variable=launch.key_variable,
        key=attachment.credential,
        keyless_args=list(launch.keyless_args),
    )
    return answer(api.Attached(thread=thread_answer(runtime, thread), launch=answer_launch), 201)


async def detach(request: web.Request) -> web.Response:
    """The person's CLI exited: its session's turn ends."""
    thread = await _thread(request)
    body = Detach.model_validate(await _json(request))
    await request.app[RUNTIME].detach(thread, body.exit_code)
    outcome = thread.projection.last_turn_reason or ""
    return answer(api.Detached(thread=thread.thread_id, outcome=outcome))


async def list_threads(request: web.Request) -> web.Response:
    """This daemon's threads; in a fleet, every other daemon's after them, with their owner."""
    runtime = request.app[RUNTIME]
    listed: list[api.AnyThread] = [thread_answer(runtime, t) for t in runtime.threads.values()]
    if runtime.fleet is not None:
        now = now_utc()
        for thread_id, lease in (await runtime.fleet.owners()).items():
            if thread_id not in runtime.threads:
                events = await runtime.log.last_seq(thread_id)
                live = lease.owner != runtime.fleet.me and lease.expires_at > now
                shown = lease if live else Lease(UNOWNED, UNOWNED, now)
                listed.append(_owned_elsewhere(thread_id, shown, events))
    return answer(api.ThreadList(threads=listed))


async def get_thread(request: web.Request) -> web.Response:
    runtime = request.app[RUNTIME]
    thread_id = request.match_info["thread_id"]
    lease = await _elsewhere(runtime, thread_id)
    if lease is not None:
        events = await runtime.log.last_seq(thread_id)
        return answer(_owned_elsewhere(thread_id, lease, events))
    return answer(thread_answer(runtime, await _thread(request)))


async def send_message(request: web.Request) -> web.Response:
    thread = await _thread(request)
    body = SendMessage.model_validate(await _json(request))
    runtime = request.app[RUNTIME]
    await _within_line(body.text, thread.spec.model, runtime.usage(thread).line, "message")
    stored = await request.app[RUNTIME].steer(thread, body.text, pinned=body.pinned)
    return answer(api.MessageSent(seq=stored.seq, thread=thread.thread_id), 202)


async def interrupt(request: web.Request) -> web.Response:
    thread = await _thread(request)
    Interrupt.model_validate(await _json(request, optional=True))
    if not await request.app[RUNTIME].interrupt(thread):
        raise Refused(
            code="not-running",
            detail=f"Thread {thread.thread_id} has no running turn to interrupt.",
        )
    return answer(api.Interrupted(interrupted=True, thread=thread.thread_id))


async def get_approvals(request: web.Request) -> web.Response:
    return answer(api.Approvals(approvals=approvals.pending(await _thread(request))))


async def post_approval(request: web.Request) -> web.Response:
    thread = await _thread(request)
    body = ApprovalAnswer.model_validate(await _json(request))
    stored = await approvals.answer(
        request.app[RUNTIME], thread, body.id, body.decision, reason=body.reason
    )
    return answer(api.ApprovalAnswered(seq=stored.seq, id=body.id, decision=body.decision))


def _int(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw) if len(raw) <= 20 else None
    except ValueError:
        value = None
    if value is None or value not in INT64:
        raise Refused(
            code="bad-query", detail=f"'{name}' must be a 64-bit integer, not {raw[:40]!r}."
        )
    return value


async def tail(request: web.Request) -> web.Response:
    """A page of the log; ``wait`` (seconds) long-polls for events after ``after``. In a
    fleet any daemon answers for any thread: one another daemon owns is read from the log,
    and waited on until its owner appends."""
    runtime = request.app[RUNTIME]
    thread_id = request.match_info["thread_id"]
    after = _int(request, "after", 0)
    limit = _int(request, "limit", DEFAULT_LIMIT)
    history = _int(request, "history", 0) != 0  # an integer, as the document says
    wait = min(float(_int(request, "wait", 0)), MAX_WAIT)
    fleet = runtime.fleet
    if fleet is not None and await _elsewhere(runtime, thread_id) is not None:
        changed = fleet.waiter(thread_id)
        if wait > 0 and await runtime.log.last_seq(thread_id) <= after:
            with anyio.move_on_after(wait):
                await changed.wait()
    else:
        thread = await _thread(request)
        if wait > 0 and thread.projection.last_seq <= after:
            changed = thread.changed
            with anyio.move_on_after(wait):
                await changed.wait()
    page = await runtime.log.tail(thread_id, after=after, limit=limit, history=history)
    return answer(
        api.TailPage(
            events=[api.logged(s) for s in page.events],
            next_after=page.next_after,
            has_more=page.has_more,
        )
    )


async def get_compact(request: web.Request) -> web.Response:
    thread = await _thread(request)
    return answer(asks.compaction(request.app[RUNTIME], thread))


async def post_compact(request: web.Request) -> web.Response:
    thread = await _thread(request)
    body = CompactAnswer.model_validate(await _json(request))
    if body.seat is not None and body.seat not in _seats(thread.projection):
        raise Refused(
            code="unknown-seat",
            detail=f"Thread {thread.thread_id!r} has no session {body.seat!r}; its one session "
            "is 'main' (or its id).",
        )
    if body.by == "thread" and request.get(BY_THREAD) != thread.thread_id:
        raise Refused(
            code="thread-only",
            detail="Only the thread's own tools (its token) compact as the thread; an operator "
            "sends by: operator.",
        )
    stored = await asks.answer(
        request.app[RUNTIME],
        thread,
        mode=body.mode,
        by=body.by,
        keep_from=body.keep_from,
        summary=body.summary,
        reason=body.reason,
    )
    queued = stored.event.kind == "compaction.requested"
    answered = api.CompactAnswered(seq=stored.seq, kind=stored.event.kind, queued=queued)
    return answer(answered, 202 if queued else 200)


def _seats(view: Projection) -> set[str]:
    """The names a compaction may give the thread's session: ``main`` and the ids of the
    sessions its calls were billed under."""
    return {"main", *(key.partition("|")[0] for key in view.billed)}


async def post_tool(request: web.Request) -> web.Response:
    """One of the agent's context tools, for a CLI thread's MCP server: its answer from the
    thread's view and log (``tool_answers``). A tool the thread lacks is 404 unknown-tool."""
    thread = await _thread(request)
    name = request.match_info["name"]
    arguments = await _json(request, optional=True)
    if name not in ANSWERED_TOOLS or not isinstance(arguments, dict):
        if name not in ANSWERED_TOOLS:
            raise Refused(
                code="unknown-tool",
                detail=f"There is no context tool {name[:60]!r} here; the tools are "
                f"{', '.join(ANSWERED_TOOLS)}.",
            )
        raise Refused(code="invalid-arguments", detail="The tool's arguments must be an object.")
    reader = RuntimeTurn(request.app[RUNTIME], thread)
    if name == CONTEXT_USAGE:
        text, failed = json.dumps(tool_answers.usage_answer(reader, thread.spec)), False
    elif name == PIN:
        pinned = tool_answers.pin_answer(thread.projection, arguments, "thread", now_utc())
        if pinned.event is not None:
            await request.app[RUNTIME].append(thread, pinned.event)
        text, failed = pinned.text, pinned.failed
    elif name == CONDENSE:
        text, failed = tool_answers.condense_answer(thread.spec, arguments)
    else:
        text, failed = await tool_answers.read_back(reader, name, arguments)
    return answer(api.ToolAnswer(text=text, is_error=failed))


async def post_pin(request: web.Request) -> web.Response:
    """Pin a message of the thread: it survives every tier from now on."""
    thread = await _thread(request)
    body = PinMessage.model_validate(await _json(request))
    pinned = tool_answers.pin_answer(thread.projection, {"seq": body.seq}, "operator", now_utc())
    if pinned.failed:
        status = 404 if thread.projection.position(body.seq) is None else 422
        return error(status, "not-pinnable", pinned.text)
    stored = None
    if pinned.event is not None:
        stored = await request.app[RUNTIME].append(thread, pinned.event)
    return answer(
        api.Pinned(
            seq=None if stored is None else stored[0].seq,
            pinned=body.seq,
            pins=sorted(thread.projection.protected_seqs),
        )
    )


async def post_archive(request: web.Request) -> web.Response:
    """Move a finished thread out of the live log into its archive file (``archive``); in a
    fleet, only the thread's owner does."""
    runtime = request.app[RUNTIME]
    thread_id = request.match_info["thread_id"]
    if await _elsewhere(runtime, thread_id) is not None:
        await _thread(request)  # refused: 409 naming the owner, or the thread changing hands
    record = await archive_held(runtime, thread_id)
    directory = runtime.settings.home / archive.ARCHIVE_DIR
    return answer(archive.record_answer(record, directory))


ROUTES: tuple[tuple[str, str, Handler], ...] = (
    ("GET", "/health", health),
    ("GET", "/ready", ready),
    ("GET", "/openapi.json", openapi),
    ("GET", "/metrics", metrics),
    ("POST", "/threads", create_thread),
    ("POST", "/attach", attach),
    ("POST", "/threads/{thread_id}/detach", detach),
    ("GET", "/threads", list_threads),
    ("GET", "/threads/{thread_id}", get_thread),
    ("POST", "/threads/{thread_id}/messages", send_message),
    ("POST", "/threads/{thread_id}/interrupt", interrupt),
    ("GET", "/threads/{thread_id}/approvals", get_approvals),
    ("POST", "/threads/{thread_id}/approvals", post_approval),
    ("GET", "/threads/{thread_id}/tail", tail),
    ("GET", "/threads/{thread_id}/compact", get_compact),
    ("POST", "/threads/{thread_id}/compact", post_compact),
    ("POST", "/threads/{thread_id}/tools/{name}", post_tool),
    ("POST", "/threads/{thread_id}/pins", post_pin),
    ("POST", "/threads/{thread_id}/archive", post_archive),
    *live_routes.ROUTES,
)


def make_app(
    runtime: Runtime,
    guard: Guard,
    *,
    edge: Sequence[Middleware] = (),
    gateway: Gateway | None = None,
    readiness: Readiness | None = None,
) -> web.Application:
    """The API, and the model gateway under ``/gateway/`` when given one; ``edge``
    middlewares run outside every other (the connection gate). ``readiness`` is the
    daemon's (None: ready already, a runtime recovered before it is served)."""
    app = web.Application(
        middlewares=[
            *edge,
            timing_middleware,
            errors_middleware,
            guard_middleware,
            readiness_middleware,
        ],
        client_max_size=MAX_BODY,
    )
    app[RUNTIME] = runtime
    app[GUARD] = guard
    app[READINESS] = Readiness() if readiness is None else readiness
    app[live_routes.SOURCE] = live_routes.Source(runtime, _thread, thread_json)
    app[live_routes.SLOTS] = live_routes.StreamSlots()
    if gateway is not None:
        # First: the router tries resources in order, and the gateway is on every model
        # request's path.
        gateway.add_routes(app)
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    ui.add_routes(app)
    return app
