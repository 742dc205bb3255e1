"""The gateway's edge: aiohttp handlers under ``/gateway/<api>/`` that check a request's pass,
measure it, forward it with the real credential and stream the reply back as the provider
sent it, logging the provider's count on the way. Each model request is timed end to end,
and an error the provider answers it with is counted by its class (by an observer: the
daemon's metrics).

A call's count is announced to the recorder before the reply's final count is passed on and
logged right after it, off the reply's path: whatever decides on the thread's view (a
checkpoint, an admission) waits for a count announced and not yet logged, so nothing acts on
a reply whose count is not in the log.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import aiohttp
import anyio
import orjson
import structlog
from aiohttp import web
from multidict import CIMultiDict

from condensate.api.bodies import BODY_TIMEOUT
from condensate.core.messages import Message
from condensate.core.tokens import counter_for
from condensate.engine import Attachment, GatewayAccess
from condensate.errors import ConfigError, ProviderError, TransportFailed
from condensate.events import ModelUsage, now_utc
from condensate.gateway.binding import (
    THINKING_EVENTS,
    Ledger,
    Lost,
    ReplyThinking,
    refused_at,
    without_thinking_from,
)
from condensate.gateway.bound import leading_model
from condensate.gateway.dialects import APIS, DIALECTS, Api, dialect
from condensate.gateway.passes import ATTACHED, Pass, Passes, PassRefused
from condensate.gateway.passes import PREFIX as PASS_PREFIX
from condensate.gateway.wire import (
    NOTICE_MARK,
    TEXT_EVENTS,
    USAGE_EVENTS,
    Insertion,
    ReplyUsage,
    RequestShape,
    Sent,
    SessionMeter,
    SseSplitter,
    credential_of,
    held_text,
)
from condensate.logs import Throttled
from condensate.providers._http import CallObserver, classify
from condensate.providers.sse import text_delta
from condensate.runtime.gateway_port import Clamps, NewestResult, Notices, ResetCut

log = structlog.get_logger()

PREFIX = "/gateway"
IN_PATH = "s"
"""The path segment before a pass carried in the base URL."""
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
        "accept-encoding",
    }
)
CLIENT_CREDENTIALS = frozenset({"x-api-key", "authorization"})
RETRIED_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""What the official SDKs (and so the CLIs) retry on their own (anthropic-sdk-python,
``_should_retry``: 408, 409, 429 and any 5xx; 529 is Anthropic's overloaded)."""
RETRIES_TOLD = 3
OFF_LOOP_BYTES = 1 << 20
"""A request larger than this is counted and rewritten in a worker thread."""
_T = TypeVar("_T")
OAUTH_BETA = "oauth-2025-04-20"
"""The beta flag Anthropic's API wants beside a subscription's OAuth bearer token."""


@dataclass(frozen=True)
class Upstream:
    """Where the gateway forwards, and the credentials only the daemon holds."""

    anthropic_base_url: str
    anthropic_api_key: str
    openai_base_url: str
    openai_api_key: str
    anthropic_auth_token: str = ""
    """A Claude subscription's OAuth token: sent as a bearer token in place of the key."""
    chatgpt_base_url: str = "https://chatgpt.com/backend-api/codex"
    """Where a person's own Codex signed in with ChatGPT is forwarded (its own backend)."""
    read_timeout_s: float = 120.0

    @property
    def timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=self.read_timeout_s)

    def base(self, api: Api, subscription: bool = False) -> str:
        """The API's base URL; ``subscription``: a request on a ChatGPT sign-in's own token,
        which the API does not take."""
        if api == "anthropic":
            return self.anthropic_base_url.rstrip("/")
        return (self.chatgpt_base_url if subscription else self.openai_base_url).rstrip("/")

    def credentials(self, api: Api, beta: str | None) -> dict[str, str]:
        if api == "openai":
            return {"Authorization": f"Bearer {self.openai_api_key}"}
        if self.anthropic_auth_token:
            betas = [b.strip() for b in (beta or "").split(",") if b.strip()]
            if OAUTH_BETA not in betas:
                betas.append(OAUTH_BETA)
            return {
                "Authorization": f"Bearer {self.anthropic_auth_token}",
                "anthropic-beta": ",".join(betas),
            }
        return {"x-api-key": self.anthropic_api_key}


class GatewayRecorder(Protocol):
    """Where what the gateway learns goes: the thread's log (the runtime)."""

    def usage_coming(self, thread_id: str) -> None:
        """A call's count is on its way: ``record_usage`` follows, always."""
        ...

    async def record_usage(
        self, thread_id: str, usage: ModelUsage, *, warned: bool = False
    ) -> None:
        """The call's count; ``warned``: the request carried the thread's staged warning."""
        ...

    async def record_baseline(self, thread_id: str, tokens: int, model: str) -> None:
        """A session's fixed prompt part, from its first reply on ``model``."""
        ...

    async def record_line(self, thread_id: str, code: str, text: str) -> None:
        """Something the gateway did that the thread's log should say (a system line)."""
        ...

    async def provider_failing(self, thread_id: str, status: int, count: int) -> None:
        """The provider answered ``count`` model requests of the thread's session in a row
        with an error its CLI retries (``status``, the last): the operator is told, where the
        engine does not tell of its CLI's retries itself."""
        ...

    def streaming_to(self, thread_id: str, model: str | None) -> Callable[[str], None] | None:
        """Where a reply's text goes as it streams, when somebody follows the thread live and
        the call is on its own model (a CLI's side call on another is not the thread's
        reply); None: nobody, and the stream is not read for it."""
        ...


class Admitted(Protocol):
    @property
    def forward(self) -> bool: ...

    @property
    def text(self) -> str: ...


class GatewayAdmitter(Protocol):
    """Who decides about a request over the thread's line (the runtime, see
    ``condensate.runtime.admission``)."""

    def gate(self, thread_id: str) -> int | None:
        """The size above which a request is held for ``admit``; None: never."""
        ...

    def receipts(self, thread_id: str) -> Mapping[str, str]:
        """Call id -> receipt: the view's cleared results, as the provider is to see them."""
        ...

    def clamps(self, thread_id: str) -> Clamps:
        """The view's clamped texts and calls, as the provider is to see them."""
        ...

    async def admit(self, thread_id: str, size: int, ids: Sequence[str]) -> Admitted: ...

    def baseline(self, thread_id: str) -> int | None:
        """The thread's fixed prompt part, as last measured (None: not known)."""
        ...

    def rewrites(self, thread_id: str) -> bool:
        """The thread's requests are rewritten from its log as it grows (an agent-reset
        thread, one that pages outputs or is told when it nears its line): each is parsed,
        and ``caught_up`` first."""
        ...

    async def caught_up(self, thread_id: str, newest: NewestResult | None) -> None:
        """Return once the log holds the request's newest result, when the view may rewrite
        it (a ``condense`` result, an output that may be paged or clamped), or a little
        later."""
        ...

    def clamp_chars(self, thread_id: str) -> int | None:
        """The length past which the thread's view clamps a text (None: nothing clamped)."""
        ...

    def reset_cut(self, thread_id: str) -> ResetCut | None:
        """Where an agent-reset thread's context starts again (None: nowhere)."""
        ...

    def person_notice(self, thread_id: str) -> str | None:
        """A line for the person whose own CLI sent the request, when windows were taken
        since they were last told (None: nothing to tell)."""
        ...

    async def heard(
        self, thread_id: str, conversation: list[tuple[int, Message]], model: str = ""
    ) -> bool:
        """A request's conversation, for a thread whose log it is (a person's own CLI
        session): logged where it goes on past the log, before anything is decided. True for
        the CLI's own compaction request: it goes on with the view, never held."""
        ...

    def notices(self, thread_id: str, model: str, size: int) -> Notices:
        """What a request of the thread on ``model``, measured at ``size`` tokens, carries
        beside what the CLI sent."""
        ...

    def session_started(self, thread_id: str) -> None: ...


@dataclass
class _Call:
    """One model request in flight: its pass, its measured size and its digests."""

    grant: Pass
    api: Api
    shape: RequestShape | None
    session: str | None = None
    tail: str = ""
    """The endpoint's path under the API's base (the pass taken out of it)."""
    notice: str | None = None
    """A line for the person, put first in the reply (a window was taken for their own CLI's
    session)."""
    own_credential: bool = False
    """The request carries the person's own credential (their CLI's login, its pass in the
    base URL): it goes on with it, not with the daemon's."""
    """The engine's session the request names (its header), if it names one."""
    model_call: bool = False
    """A POST to the API's model endpoint: timed, and a provider's error to it counted."""
    side: bool = False
    """A model call of a context of its own (a subagent's): forwarded as sent, never held,
    its usage logged as a side call, nothing of it measured as the thread's prompt."""
    measured: int | None = None
    sent: Sent | None = None
    meter: SessionMeter | None = None
    later: bytes | None = None
    """The request's body, when it went on before it was measured (its bound was under the
    gate): it is measured once its reply has gone out."""
    own: bytes | None = None
    """The request as the CLI sent it, when that is what went on (no receipt in it)."""
    usage: ReplyUsage = field(default_factory=ReplyUsage)
    announced: bool = False
    first: bool = False
    """The session's first counted reply on this model: its baseline is logged too."""
    logged: bool = False
    warned: bool = False
    """The request carried the thread's staged warning: it is logged with the count."""
    edits: _SessionEdits | None = None
    """The session's notices and thinking ledger (a request the gateway parsed)."""
    prefix: bytes | None = None
    """The forwarded prefix's digest, when the gateway changed the request: its reply's
    thinking is bound to it."""
    lost: Lost = field(default_factory=Lost)
    """Thinking the request went without (taken out here, or dropped by the provider)."""
    thinking: ReplyThinking = field(default_factory=ReplyThinking)

    @property
    def metered(self) -> bool:
        """A model call: its reply's count is read and logged."""
        return self.shape is not None or self.later is not None


@dataclass
class _SessionEdits:
    """What the gateway keeps of one CLI session on one model beside its meter: the notices
    it added (each stays where it went) and the ledger of the session's signed thinking."""

    insertions: list[Insertion] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)
    shown: frozenset[str] = frozenset()
    """The results the session's last rewritten request showed otherwise (receipts, pages,
    clamps), by call id: a new one is where the cached prefix ends."""

    def add(self, api: Api, document: Mapping[str, Any], notices: Notices) -> None:
        """Each notice due and not yet added goes after the request's last message."""
        for notice in notices.due():
            if any(i.key == notice.key for i in self.insertions):
                continue
            where = dialect(api).insertion_at_end(document, notice)
            if where is not None:
                self.insertions.append(where)

    def __bool__(self) -> bool:
        return bool(self.insertions or self.ledger.removed)


@dataclass(frozen=True)
class _Rewrite:
    """What the view changes in a request: results shown otherwise (``shown``: receipts,
    pages, a settled ``condense``), and where an agent's reset starts the context again."""

    shown: Mapping[str, str]
    cut: ResetCut | None = None
    clamped: Clamps = field(default_factory=Clamps)

    def apply(self, api: Api, document: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """The request as the provider is to get it, and whether that differs from
        ``document``."""
        cut = False
        if self.cut is not None:
            document, cut = dialect(api).with_reset(document, self.cut)
        out, replaced = dialect(api).with_receipts(document, self.shown)
        out, clamped = dialect(api).with_clamps(out, self.clamped)
        return out, cut or replaced > 0 or clamped > 0


@dataclass
class Gateway:
    upstream: Upstream
    recorder: GatewayRecorder
    session: aiohttp.ClientSession
    admitter: GatewayAdmitter | None = None
    """None: requests are forwarded as they come, whatever their size."""
    passes: Passes = field(default_factory=Passes)
    meters: dict[str, SessionMeter] = field(default_factory=dict)
    """Session -> its meter."""
    edits: dict[str, _SessionEdits] = field(default_factory=dict)
    """Session -> the notices added to it and its thinking ledger."""
    observer: CallObserver | None = None
    """Who hears of each model request's duration and of the provider's errors."""
    refused: Throttled = field(default_factory=lambda: Throttled("gateway_refused"))
    """Requests without a good pass: anyone on the machine can send them, so one line a
    minute says how many."""
    off_endpoints: Throttled = field(default_factory=lambda: Throttled("gateway_not_an_endpoint"))
    failing: dict[str, int] = field(default_factory=dict)
    """Thread -> model requests in a row the provider answered with an error the CLI
    retries."""

    def url(self, daemon_url: str, api: Api) -> str:
        """The base URL a CLI is given: Claude Code appends ``/v1/messages``, Codex
        ``/responses``."""
        return f"{daemon_url}{PREFIX}/{api}"

    def access(
        self, daemon_url: str, thread_id: str, engine_api: str, session_header: str | None = None
    ) -> GatewayAccess:
        """What the thread's engine gives its CLI sessions, on ``engine_api`` (the API its
        engine declares); ``session_header`` is where its CLI names the session a request
        belongs to."""
        if engine_api not in DIALECTS:
            msg = f"An engine's gateway API is {engine_api!r}; the gateway speaks {APIS}."
            raise ConfigError(msg)
        api: Api = "anthropic" if engine_api == "anthropic" else "openai"
        if session_header:
            self.passes.session_headers[thread_id] = session_header
        url = self.url(daemon_url, api)
        return GatewayAccess(
            url=url,
            issue=lambda: self.issue(thread_id, api).credential,
            session=lambda session_id: self.bind(thread_id, session_id),
            attach=lambda: self._attachment(url, thread_id, api),
        )

    def _attachment(self, url: str, thread_id: str, api: Api) -> Attachment:
        """A person's own CLI session's pass (the thread's one, the same after a restart) and
        its base URL with the pass in its path."""
        credential = self.issue(thread_id, api, ATTACHED).credential
        return Attachment(f"{url}/{IN_PATH}/{credential}", credential)

    def bind(self, thread_id: str, session_id: str) -> None:
        """The thread's engine now runs session ``session_id``: a request naming another (in
        its engine's session header) is refused."""
        self.passes.bind(thread_id, session_id)
        if self.admitter is not None:
            self.admitter.session_started(thread_id)

    def issue(self, thread_id: str, api: Api, session: str | None = None) -> Pass:
        """A pass for the thread's next CLI session, good on ``api``; its earlier one is
        refused from now."""
        grant = self.passes.issue(thread_id, api, session)
        for key in [k for k in self.meters if k.startswith(f"{thread_id}.")]:
            del self.meters[key]
        for key in [k for k in self.edits if k.startswith(f"{thread_id}.")]:
            del self.edits[key]
        return grant

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", PREFIX + "/{provider}/{tail:.*}", self.handle)

    # -- a request ----------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        name = request.match_info["provider"]
        if name not in APIS:
            return web.json_response(
                {"error": "not-found", "detail": f"The gateway serves {', '.join(APIS)}."},
                status=404,
            )
        api: Api = "anthropic" if name == "anthropic" else "openai"
        credential, tail, own_login = _pass_in_path(request.match_info["tail"], request.headers)
        named = self.passes.session_named(credential, request.headers)
        try:
            grant = self.passes.check(credential, api, named)
        except PassRefused as exc:
            self.refused.hit(code=exc.code, path=request.path[:200])
            return _error(api, 401, exc.code, str(exc))
        if not dialect(api).endpoint(request.method, tail):
            self.off_endpoints.hit(thread=grant.thread_id, method=request.method, path=tail[:200])
            detail = (
                f"{request.method} {tail[:200]!r} is not an endpoint the gateway forwards: "
                f"{dialect(api).ENDPOINTS_TEXT}."
            )
            return _error(api, 404, "not-an-endpoint", detail)
        limit = dialect(api).MAX_REQUEST
        try:
            body = await _body(request, limit)
        except TimeoutError:
            detail = f"The request's body did not arrive within {BODY_TIMEOUT:g} s."
            return _error(api, 408, "body-timeout", detail)
        if body is None:
            detail = f"A request may hold {limit:,} bytes ({dialect(api).MAX_REQUEST_TEXT})."
            return _error(api, 413, "request-too-large", detail)
        call = _Call(grant, api, None, session=named, tail=tail, own_credential=own_login)
        call.model_call = request.method == "POST" and tail in dialect(api).PATHS
        call.side = call.model_call and dialect(api).side_request(request.headers)
        if call.side:
            own = _json_object(body)
            if own is not None:  # its reply's count is read, no more
                call.shape = dialect(api).shape(own)
        elif call.model_call:
            prepared = await self._model_call(call, body)
            if isinstance(prepared, web.Response):
                return prepared
            body = prepared
        response = await self._forward(request, call, tail, body)
        if call.model_call and self.observer is not None:
            self.observer.ended(api, time.perf_counter() - started)
        return response

    async def _model_call(self, call: _Call, body: bytes) -> bytes | web.Response:
        """The body of a model call of the thread's own conversation as it is to go on (the
        view applied), or Condensate's own reply when the runtime ends the CLI's turn."""
        admitter, thread, api = self.admitter, call.grant.thread_id, call.api
        document: Mapping[str, Any] | None = None
        parsed: Mapping[str, Any] | None = None  # read for its newest result only
        compacting = False
        if admitter is not None and admitter.rewrites(thread):
            body = _without_notices(api, body)
            document = _json_object(body)
            if document is not None:
                conversation = dialect(api).conversation(document)
                model = str(document.get("model") or "")
                compacting = await admitter.heard(thread, conversation, model)
                await admitter.caught_up(thread, dialect(api).newest_result(document))
        elif admitter is not None and (arrived := self._arrived(call, body, thread)) is not None:
            # The CLI's request may outrun its log: the first output or argument past the
            # clamp must not reach the provider whole because the view has not seen it yet.
            parsed = _json_object(body)
            newest = None if parsed is None else dialect(api).newest_result(parsed)
            if newest is not None:
                await admitter.caught_up(thread, replace(newest, arrived=arrived))
        # Asked once: the bound and the measurement both decide against them.
        shown = admitter.receipts(thread) if admitter is not None else {}
        clamped = admitter.clamps(thread) if admitter is not None else Clamps()
        gate = admitter.gate(thread) if admitter is not None and not compacting else None
        cut = admitter.reset_cut(thread) if admitter is not None else None
        rewrite = _Rewrite(shown, cut, clamped)
        if cut is None and document is None and self._surely_under(call, body, rewrite, gate):
            call.later = call.own = body
        elif document is not None or (document := parsed or _json_object(body)) is not None:
            admitted = await self._admit(call, document, body, rewrite, gate)
            if isinstance(admitted, web.Response):
                return admitted
            body = admitted
            if admitter is not None and not compacting:
                call.notice = admitter.person_notice(thread)
        return body

    async def _forward(
        self, request: web.Request, call: _Call, tail: str, body: bytes
    ) -> web.StreamResponse:
        """Send the request on with the real credential and relay the reply as it comes; an
        upstream that cannot be reached is 502 upstream-unreachable."""
        api = call.api
        signed_in = call.own_credential and dialect(api).subscription(request.headers)
        url = f"{self.upstream.base(api, signed_in)}/{tail}"
        if request.query_string:
            url += f"?{request.query_string}"
        headers = _forwarded(request.headers, keep_credential=call.own_credential)
        if not call.own_credential:
            headers.update(self.upstream.credentials(api, request.headers.get("anthropic-beta")))
        headers["Accept-Encoding"] = "identity"
        try:
            retried = False
            while True:
                async with self.session.request(
                    request.method,
                    url,
                    data=body,
                    headers=headers,
                    timeout=self.upstream.timeout,
                    auto_decompress=False,
                ) as upstream:
                    if retried or not _may_be_binding(call, upstream):
                        return await self._relay(request, upstream, call)
                    data = await upstream.read()
                    again = await self._without_refused_thinking(call, body, data)
                    if again is None:
                        return await self._relay(request, upstream, call, data)
                    body, retried = again, True  # once: a second refusal goes to the CLI
        except (aiohttp.ClientError, TimeoutError) as exc:
            detail = f"Condensate's gateway could not reach {url}: {type(exc).__name__} {exc}"
            log.warning("gateway_upstream_failed", url=url, error=str(exc))
            self._failed(call, TransportFailed(detail, provider=api))
            return _error(api, 502, "upstream-unreachable", detail)

    async def _without_refused_thinking(
        self, call: _Call, body: bytes, data: bytes
    ) -> bytes | None:
        """The request again without the thinking the provider refused as bound to another
        conversation (the documented fix: from the block it names on, every thinking block
        out), said in the thread's log; None when ``data`` is no such refusal."""
        try:
            message = str(_loads(data)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            return None
        at = refused_at(message)
        document = _json_object(body)
        if at is None or document is None:
            return None
        model = str(document.get("model") or "")
        edits = call.edits or self.edits.setdefault(self._key(call, model), _SessionEdits())
        call.edits = edits
        kept = without_thinking_from(json.loads(body), at, edits.ledger, counter_for(model).count)
        call.lost = call.lost + kept.lost
        call.prefix = kept.prefix
        call.own = None
        text = (
            f"The provider refused a request: a thinking block was bound to a different "
            f"conversation ({message.split(':', 1)[0]}). Sent again without the thinking from "
            f"there on ({kept.lost.blocks} blocks, ~{kept.lost.tokens:,} tokens)."
        )
        log.warning("gateway_thinking_refused", thread=call.grant.thread_id, at=at)
        await self.recorder.record_line(call.grant.thread_id, "thinking-refused", text)
        return _dumps(kept.body)

    def _failed(self, call: _Call, error: ProviderError) -> None:
        """A model request failed on its way to or from the provider: counted by class."""
        if call.model_call and self.observer is not None:
            self.observer.failed(call.api, error)

    def _surely_under(self, call: _Call, body: bytes, rewrite: _Rewrite, gate: int | None) -> bool:
        """Whether the request can go on before it is parsed: nothing in it is to be
        replaced (the view's receipts and clamps), and its bytes bound it under the gate
        (``bound``), or no gate applies."""
        if rewrite.shown or rewrite.clamped:
            return False
        model = leading_model(body)
        if model is None:
            return gate is None
        key = self._key(call, model)
        if self.edits.get(key):
            return False  # its notices go in, and thinking taken out stays out
        if gate is None:
            return True
        meter = self.meters.get(key)
        size = meter.bound(body) if meter is not None else None
        return size is not None and size <= gate

    def _arrived(self, call: _Call, body: bytes, thread: str) -> int | None:
        """How many bytes the request holds that its session's last counted request did not,
        when they may hold a text the thread's view clamps (more of them than the clamp has
        characters: a character is at least a byte); None when they cannot."""
        clamp = self.admitter.clamp_chars(thread) if self.admitter is not None else None
        if clamp is None or len(body) <= clamp:
            return None
        model = leading_model(body)
        meter = self.meters.get(self._key(call, model)) if model is not None else None
        arrived = meter.new_bytes(body) if meter is not None else None
        if arrived is None:
            return len(body)  # nothing to compare with: all of it may be new
        return arrived if arrived > clamp else None

    def _key(self, call: _Call, model: str) -> str:
        # One meter per model: Claude Code's side calls (a title, a quota check on a small
        # model) neither anchor nor measure the session's own requests.
        return f"{call.grant.thread_id}.{call.grant.session}.{model}"

    async def _admit(
        self,
        call: _Call,
        document: Mapping[str, Any],
        body: bytes,
        rewrite: _Rewrite,
        gate: int | None,
    ) -> bytes | web.Response:
        """The body to forward (rewritten from the view: the receipts in place of cleared
        results, an agent's reset), or Condensate's own reply when the runtime ends the
        CLI's turn instead."""
        thread = call.grant.thread_id
        admitter = self.admitter
        # A large request is counted and written off the event loop: every other session's
        # requests (and the API) go on meanwhile.
        big = len(body) > OFF_LOOP_BYTES
        projected, changed = rewrite.apply(call.api, document)
        size = await _off_loop(big, self._measure, call, projected)
        if admitter is not None and gate is not None and size > gate:
            verdict = await admitter.admit(thread, size, dialect(call.api).result_ids(projected))
            if not verdict.forward:
                return self._held(call, verdict.text)
            fresh, clamped = admitter.receipts(thread), admitter.clamps(thread)
            cut = admitter.reset_cut(thread)
            if fresh != rewrite.shown or clamped != rewrite.clamped or cut != rewrite.cut:
                rewrite = _Rewrite(fresh, cut, clamped)
                projected, changed = rewrite.apply(call.api, document)
                await _off_loop(big, self._measure, call, projected)
        assert call.shape is not None
        notices = Notices()
        if admitter is not None and admitter.rewrites(thread):
            notices = admitter.notices(thread, call.shape.model, size)
        key = self._key(call, call.shape.model)
        edits = call.edits = self.edits.setdefault(key, _SessionEdits())
        edits.add(call.api, document, notices)
        # A request the gateway leaves as it is still has its thinking checked when the
        # session holds thinking produced under a changed prefix: a person's CLI may carry
        # such a block into a conversation of its own (the reply to its compaction request).
        if not changed and not edits and not edits.ledger.produced:
            call.own = body
            return body  # byte for byte as the CLI sent it
        return await _off_loop(big, self._rewritten, call, body, rewrite, edits, notices)

    def _rewritten(
        self, call: _Call, body: bytes, rewrite: _Rewrite, edits: _SessionEdits, notices: Notices
    ) -> bytes:
        """The request as it goes on. What goes on is written from Python's own parse:
        orjson reads an integer past 64 bits as a float, and the provider must get the CLI's
        request exactly, but for what the view rewrites and the notices it carries."""
        assert call.shape is not None
        original = json.loads(body)
        exact, carried = dialect(call.api).with_insertions(original, edits.insertions)
        call.warned = notices.warning is not None and notices.warning.key in carried
        exact, _ = rewrite.apply(call.api, exact)
        if dialect(call.api).binds(call.shape.model):
            count = counter_for(call.shape.model).count
            kept = dialect(call.api).keep(exact, original, edits.ledger, count)
            exact, call.lost, call.prefix = kept.body, kept.lost, kept.prefix
        new = set(rewrite.shown) - edits.shown
        edits.shown = frozenset(rewrite.shown)
        if new:
            exact = dialect(call.api).with_cache_mark(exact, new)
        return _dumps(exact)

    def _measure(self, call: _Call, document: Mapping[str, Any]) -> int:
        shape = dialect(call.api).shape(document)
        key = self._key(call, shape.model)
        meter = self.meters.get(key)
        if meter is None:
            meter = self.meters[key] = SessionMeter(counter_for(shape.model))
        call.shape = shape
        call.meter = meter
        known = self.admitter.baseline(call.grant.thread_id) if self.admitter else None
        size, call.sent = meter.measure(shape, known)
        call.measured = size
        return size

    def _held(self, call: _Call, text: str) -> web.Response:
        """Condensate's own reply: it ends the CLI's turn with ``text`` and counts nothing."""
        assert call.shape is not None
        model = call.shape.model
        reply_id = f"{dialect(call.api).REPLY_PREFIX}_condensate_{secrets.token_hex(8)}"
        log.info(
            "gateway_held",
            thread=call.grant.thread_id,
            session=call.session,
            size=call.measured,
            messages=len(call.shape.messages),
        )
        if call.shape.stream:
            return web.Response(
                body=dialect(call.api).held_stream(model, held_text(text), reply_id),
                content_type="text/event-stream",
            )
        return web.json_response(dialect(call.api).held_reply(model, held_text(text), reply_id))

    async def _relay(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        call: _Call,
        data: bytes | None = None,
    ) -> web.StreamResponse:
        """The reply back to the CLI as it comes (``data``: its body, already read)."""
        await self._count_failure(call, upstream.status)
        if not call.model_call:  # a model call is logged as its model.usage
            log.info(
                "gateway_forwarded",
                thread=call.grant.thread_id,
                method=request.method,
                endpoint=call.tail,
                status=upstream.status,
            )
        headers = _forwarded(upstream.headers, reply=True)
        streamed = upstream.headers.get("Content-Type", "").startswith("text/event-stream")
        try:
            if streamed and data is None:
                return await self._stream(request, upstream, call, headers)
            if data is None:
                data = await upstream.read()
            if upstream.status >= 400:
                self._answered_error(call, upstream, data)
            if call.metered and upstream.status == 200:
                with contextlib.suppress(ValueError):
                    reply = _loads(data)
                    dialect(call.api).read_body(call.usage, reply)
                    call.thinking.read_body(reply)
                if call.usage.seen:
                    self._announce(call)
            if call.notice and upstream.status == 200:
                with contextlib.suppress(ValueError):
                    data = _dumps(dialect(call.api).noticed_reply(_loads(data), call.notice))
            whole = web.Response(body=data, status=upstream.status, headers=headers)
            with contextlib.suppress(ConnectionResetError):
                await whole.prepare(request)
                await whole.write_eof()
            return whole
        finally:
            # After the reply has gone out (off its path), and for a reply cut short too: it
            # was counted and billed.
            if call.metered and call.usage.seen and not call.logged:
                await self._log(call)

    async def _count_failure(self, call: _Call, status: int) -> None:
        """Count the thread's model requests the provider answered in a row with an error
        the CLIs retry on their own; the operator is told at the ``RETRIES_TOLD``-th."""
        if not call.model_call or call.side:
            return
        thread = call.grant.thread_id
        if status not in RETRIED_STATUSES:
            self.failing.pop(thread, None)
            return
        count = self.failing[thread] = self.failing.get(thread, 0) + 1
        if count == RETRIES_TOLD:
            await self.recorder.provider_failing(thread, status, count)

    def _answered_error(
        self, call: _Call, upstream: aiohttp.ClientResponse, data: bytes | None
    ) -> None:
        """The provider answered a model request with an error status: counted by its class,
        read as the daemon's own clients read it (the status, the body's error type)."""
        if not call.model_call or self.observer is None:
            return
        body: Any = None
        if data is not None:
            try:
                body = _loads(data)
            except ValueError:
                body = data[:500].decode("utf-8", "replace")
        self._failed(call, classify(call.api, upstream.status, body, dict(upstream.headers)))

    async def _stream(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        call: _Call,
        headers: CIMultiDict[str],
    ) -> web.StreamResponse:
        if upstream.status >= 400:
            self._answered_error(call, upstream, None)
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        edit = dialect(call.api).noticed_stream(call.notice) if call.notice else None
        if upstream.status != 200:
            edit = None
        splitter = SseSplitter(wanted=USAGE_EVENTS)
        tell = self._streaming_to(call) if upstream.status == 200 else None
        texts = SseSplitter(wanted=TEXT_EVENTS) if tell is not None else None
        thinking = (
            SseSplitter(wanted=THINKING_EVENTS)
            if call.metered and call.api == "anthropic" and upstream.status == 200
            else None
        )
        try:
            async for chunk in upstream.content.iter_any():
                if thinking is not None:
                    for data in thinking.feed(chunk):
                        call.thinking.read_event(data)
                if call.metered and not call.announced:
                    for data in splitter.feed(chunk):
                        dialect(call.api).read_event(call.usage, data)
                        if call.api == "openai":
                            call.thinking.read_event(data)
                    if call.usage.complete:
                        self._announce(call)
                if texts is not None and tell is not None:
                    for data in texts.feed(chunk):
                        tell(text_delta(data))
                try:
                    await response.write(chunk if edit is None else edit.feed(chunk))
                except ConnectionResetError:  # aiohttp's reset errors are this too
                    log.info("gateway_client_left", thread=call.grant.thread_id)
                    return response
        except (aiohttp.ClientError, TimeoutError) as exc:
            # The provider cut its stream after it began: the client's stream ends where it
            # stands (no second response inside it), and the CLI treats it as any cut stream.
            log.warning("gateway_stream_cut", url=str(upstream.url), error=repr(exc))
            cut = TransportFailed(f"The stream broke off: {exc!r}", provider=call.api)
            self._failed(call, cut)
            response.force_close()
        with contextlib.suppress(ConnectionResetError):
            if edit is not None:
                await response.write(edit.end())
            await response.write_eof()
        return response

    def _streaming_to(self, call: _Call) -> Callable[[str], None] | None:
        if not call.model_call:
            return None
        model = call.shape.model if call.shape is not None else leading_model(call.later or b"")
        return self.recorder.streaming_to(call.grant.thread_id, model)

    def _announce(self, call: _Call) -> None:
        """The count is complete: the session's meter learns it now (the CLI's next request
        may follow at once), and the recorder is told it is coming."""
        call.announced = True
        if call.later is None:
            self._answer(call)
        self.recorder.usage_coming(call.grant.thread_id)

    def _answer(self, call: _Call) -> None:
        """The session's meter learns the provider's count for the request."""
        if call.meter is not None and call.sent is not None:
            call.first = call.meter.anchor is None
            call.meter.answered(call.sent, call.usage.prompt, call.own)

    async def _log(self, call: _Call) -> None:
        call.logged = True
        if not call.metered or not call.usage.seen:
            return
        if not call.announced:
            self._announce(call)
        if call.later is not None:
            if (document := _json_object(call.later)) is not None:
                self._measure(call, document)
            self._answer(call)
        reply = call.usage
        asked = call.shape.model if call.shape is not None else ""
        if call.edits is not None and call.prefix is not None:
            call.edits.ledger.record(call.thinking.all_keys(), call.prefix, reply.output)
        lost = call.lost + Lost(call.thinking.dropped, 0)
        usage = ModelUsage(
            at=now_utc(),
            input=reply.input,
            cache_read=reply.cache_read,
            cache_write=reply.cache_write,
            output=reply.output,
            cache_write_1h=reply.cache_write_1h,
            compaction_input=reply.compaction_input,
            compaction_output=reply.compaction_output,
            model=reply.model or asked,
            message_id=reply.message_id,
            measured=call.measured,
            side=call.side,
            session=call.session or self.passes.engine_sessions.get(call.grant.thread_id),
            thinking_dropped=lost.blocks,
            thinking_dropped_tokens=lost.tokens,
        )
        await self.recorder.record_usage(call.grant.thread_id, usage, warned=call.warned)
        if call.first and call.sent is not None and call.meter is not None:
            baseline = call.meter.baseline(reply.prompt, call.sent)
            await self.recorder.record_baseline(call.grant.thread_id, baseline, asked)


def _may_be_binding(call: _Call, upstream: aiohttp.ClientResponse) -> bool:
    """A reply that may be a refusal of a thinking block's binding: read whole before it is
    relayed, as it may be retried."""
    return call.model_call and call.api == "anthropic" and upstream.status == 400


def _dumps(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def _json_object(body: bytes) -> Mapping[str, Any] | None:
    """The request's JSON object; None for anything else (the provider answers it in its
    own words)."""
    try:
        document = _loads(body)
    except ValueError:
        return None
    return document if isinstance(document, Mapping) else None


def _loads(data: bytes) -> Any:
    """JSON, parsed by orjson (a request is parsed on its way to the provider: orjson takes
    a third of the time); what orjson refuses and Python's parser takes (an integer past 64
    bits, NaN, a lone surrogate) is parsed by Python's, as the provider would take it."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _forwarded(
    headers: Mapping[str, str], *, reply: bool = False, keep_credential: bool = False
) -> CIMultiDict[str]:
    """Every header but the hop-by-hop ones and the client's own credential, unless it is to
    be kept (a reply keeps its ``Content-Encoding``: its bytes pass through as they came)."""
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lower = name.lower()
        if (lower in CLIENT_CREDENTIALS and not keep_credential) or (
            lower in HOP_BY_HOP and not (reply and lower == "content-encoding")
        ):
            continue
        out.add(name, value)
    return out


async def _body(request: web.Request, limit: int) -> bytes | None:
    """The request's body, read past the API's 1 MiB cap (a long conversation is tens of
    megabytes) up to ``limit``; None above it (refused by its declared length unread)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    parts: list[bytes] = []
    size = 0
    with anyio.fail_after(BODY_TIMEOUT):
        async for chunk in request.content.iter_chunked(1 << 16):
            size += len(chunk)
            if size > limit:
                return None
            parts.append(chunk)
    return b"".join(parts)


async def _off_loop(big: bool, work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)``, in a worker thread when ``big``."""
    if not big:
        return work(*args)
    return await anyio.to_thread.run_sync(work, *args)


def _without_notices(api: Api, body: bytes) -> bytes:
    """The request without the lines for the person the gateway put in earlier replies
    (parsed by Python's own reader: the rest goes on exactly)."""
    if NOTICE_MARK.encode() not in body:
        return body
    try:
        stripped = dialect(api).without_notices(json.loads(body))
    except ValueError:
        return body
    return body if stripped is None else _dumps(stripped)


def _pass_in_path(tail: str, headers: Mapping[str, str]) -> tuple[str, str, bool]:
    """The pass, the endpoint, and whether the request's own credential goes on: a person's
    own CLI carries its pass in its base URL (``<api>/s/<pass>/v1/messages``) and its own
    login in its headers (a person without one is given the pass as its key, and the daemon's
    is used); any other CLI carries the pass as its
    credential."""
    credential = credential_of(headers)
    if not tail.startswith(f"{IN_PATH}/"):
        return credential, tail, False
    _, given, *rest = tail.split("/", 2)
    # The person's login goes on as the CLI sent it, even none (a models listing Claude Code
    # sends bare): the daemon's key only for a person who has no login and was given the pass.
    own = not credential.startswith(f"{PASS_PREFIX}.")
    return given, rest[0] if rest else "", own


def _error(api: Api, status: int, code: str, message: str) -> web.Response:
    return web.json_response(dialect(api).error_body(status, code, message), status=status)
