"""The runtime: threads, their turns, window checks and children.

Every change goes through ``append``: the event is written to the log, then folded into the
thread's in-memory projection, so the view in memory is always the log's view. Background work
(turns, ask deadlines) runs in the runtime's task group, each task guarded: an exception in
one thread's work is logged and ends that work only, never another thread or the daemon.
A turn runs in a cancel scope of its own, which ``interrupt`` uses. Asks and queued
compactions are in ``condensate.runtime.asks``; rebuilding threads after a restart in
``condensate.runtime.recovery``.

The layer: ``thread`` and ``turn_context`` (what an engine's turn sees of the runtime),
``asks``, ``approvals``, ``admission`` (what the runtime decides for a request the gateway
holds), ``tool_answers``, ``emergency``, ``curator`` (the summary's calls), ``archiving``,
``recovery`` and ``fleet``; ``live``, ``metrics`` and ``webhook`` subscribe to its appends.
The rule it keeps: it runs the core and the event log and speaks to engines only through
``condensate.engine``; it never imports the HTTP edge or an engine's package.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import anyio
import structlog
from anyio.abc import TaskGroup

from condensate.api.tokens import thread_token
from condensate.core import prices, window_step
from condensate.core.messages import Message
from condensate.core.meter import ContextUsage, ModelWindow, measure
from condensate.core.planner import Ask, Cut
from condensate.core.projector import Projection, snapshot
from condensate.core.queries import last_text, open_calls, unanswered_input
from condensate.core.summary import Miss, Summary, carry_out
from condensate.core.tokens import bare_model, count_event, counter_for, small_batch
from condensate.engine import (
    INTERRUPTED_BY_OPERATOR,
    Attachment,
    Checkpoint,
    EngineAdapter,
    EngineEnv,
    Engines,
    EngineSettings,
    GatewayAccess,
    Interruptible,
    ThreadSpec,
    TurnOutcome,
)
from condensate.engine import registry as engines
from condensate.engine.registry import Profile, missing_credential
from condensate.errors import CondensateError, ConfigError, Refused, ThreadOwnedElsewhere
from condensate.eventlog import EventStore, Owners
from condensate.events import (
    BaselineMeasured,
    ChildJoined,
    ChildSpawned,
    Event,
    ModelUsage,
    Stored,
    SystemLine,
    ThreadCreated,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    Window,
    now_utc,
)
from condensate.providers import ModelClient, billed_model, parse_model
from condensate.runtime import admission, approvals, asks, attached
from condensate.runtime.admission import Admission
from condensate.runtime.curator import Curator
from condensate.runtime.gateway_port import Clamps, NewestResult, Notices, ResetCut
from condensate.runtime.live import Hub
from condensate.runtime.metrics import Metrics
from condensate.runtime.thread import Thread
from condensate.runtime.turn_context import RuntimeTurn
from condensate.settings import Settings

log = structlog.get_logger()

SNAPSHOT_EVERY = 1_000
STOPPED_BY_DAEMON = "the daemon stopped during this turn"
COUNT_WAIT_SECONDS = 2.0
"""How long a decision waits for a count the gateway announced (it is logged within a
millisecond or so of the reply's end; a stuck log must not stall the thread)."""
INTERRUPT_GRACE_SECONDS = 1.0
"""How long an engine that interrupts its own turn (a CLI's interrupt request) is given
before the turn is cancelled; the whole interrupt stays within 2 s."""
INTERRUPT_WAIT_SECONDS = 0.9
"""How long ``interrupt`` then waits for the cancelled turn to end."""


@dataclass(frozen=True)
class ThreadHost:
    """One of the runtime's threads, as the window step sees it."""

    runtime: Runtime
    thread: Thread

    @property
    def view(self) -> Projection:
        return self.thread.projection

    def usage(self) -> ContextUsage:
        return self.runtime.usage(self.thread)

    def now(self) -> datetime:
        return self.runtime.clock()

    async def carry_out(self, cut: Cut) -> Window | str:
        return await self.runtime.carry_out(self.thread, cut)

    async def say(self, code: str, text: str) -> None:
        await self.runtime.append(self.thread, SystemLine(at=self.now(), code=code, text=text))

    async def ask(self, decision: Ask) -> None:
        if self.thread.projection.ask is None:
            await asks.open_ask(self.runtime, self.thread, decision)


@dataclass
class Runtime:
    settings: Settings
    log: EventStore
    engines: Engines
    curator: Curator
    client_for: Callable[[str], ModelClient]
    window_for: Callable[[str], Awaitable[ModelWindow]]
    clock: Callable[[], datetime] = now_utc
    daemon_url: str = ""
    """The API's address for engines' tools; set by the composition root before ``recover``."""
    daemon_token: str = ""
    gateway_for: Callable[[str, str, str | None], GatewayAccess] | None = None
    """The gateway's access for a thread: its id, its engine's API, its session header."""
    """A thread's way through the daemon's gateway (given the header its CLI names its
    session in); set by the composition root. None (a runtime without an HTTP server): the
    CLIs call their provider directly."""
    fleet: Owners | None = None
    """Who owns the threads of a log other daemons share (PostgreSQL); None: this daemon
    owns every thread in its log."""
    usage_sink: Callable[[dict[str, Any]], None] | None = None
    """Where a report of each model call's usage goes (the usage webhook), if anywhere."""
    engine_settings: Mapping[str, EngineSettings] | None = None
    """Each engine's own settings by name; an engine not named reads its own from the
    environment."""
    metrics: Metrics = field(default_factory=Metrics)
    """The daemon's metrics: every appended event is folded into them; they read the
    threads' statuses from here."""
    threads: dict[str, Thread] = field(default_factory=dict)
    live: Hub = field(default_factory=Hub)
    """The live channel: every event appended is published here once it is folded, with
    each turn's start and end and a thread's leaving (``condensate.runtime.live``)."""
    profiles: dict[str, Profile] = field(init=False)
    _tasks: TaskGroup | None = None

    def __post_init__(self) -> None:
        self.profiles = engines.profiles(self.engines, self.settings, self.engine_settings)
        self.metrics.statuses = lambda: [t.status for t in self.threads.values()]

    def bind(self, tasks: TaskGroup) -> None:
        """Background work (turns, ask deadlines) runs in ``tasks``."""
        self._tasks = tasks

    def spawn_task(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        """Run ``fn`` in the background; an exception it raises is logged with its traceback
        and goes no further (the task group would end the daemon with it)."""
        if self._tasks is None:
            msg = "The runtime was not bound to a task group."
            raise CondensateError(msg)
        self._tasks.start_soon(_guarded, fn, args, name, name=name)

    # -- the log ---------------------------------------------------------------------------

    async def append(self, thread: Thread, events: Event | Sequence[Event]) -> list[Stored]:
        """Write to the log, then fold into the view and the metrics: neither runs ahead of
        the log. A call's count is stamped with its cost at list price on the way."""
        batch = [events] if not isinstance(events, Sequence) else list(events)
        batch = [self._priced(e) if isinstance(e, ModelUsage) else e for e in batch]
        # One append at a time per thread: two writers (a turn and an HTTP steer) would
        # otherwise fold their events out of seq order.
        # Shielded once begun: a cancellation (an interrupt) between the write and the fold
        # would leave the view behind the log.
        async with thread.appending:
            with anyio.CancelScope(shield=True):
                try:
                    stored = await self._write_and_fold(thread, batch)
                except ThreadOwnedElsewhere:
                    # Another daemon of the fleet took the thread: nothing more is written
                    # for it here (the fleet's next round closes its engine).
                    thread.released = True
                    raise
        thread.notify()
        self._publish_status(thread)
        if self.usage_sink is not None:
            for item in stored:
                if isinstance(item.event, ModelUsage) and not item.event.side:
                    self.usage_sink(self.usage_report(thread, item))
        return stored

    def usage_report(self, thread: Thread, counted: Stored) -> dict[str, Any]:
        """What the usage stream says of one model call: the call's count and cost, and the
        thread's usage against its line, ceiling and window after it."""
        usage = self.usage(thread)
        call = counted.event
        assert isinstance(call, ModelUsage)
        return {
            "thread": thread.thread_id,
            "seq": counted.seq,
            "at": call.at.isoformat(),
            "engine": thread.spec.engine,
            "model": billed_model(call.model, thread.spec.model),
            "call": {
                "input": call.input,
                "cacheRead": call.cache_read,
                "cacheWrite": call.cache_write,
                "cacheWrite1h": call.cache_write_1h,
                "output": call.output,
                "compactionInput": call.compaction_input,
                "compactionOutput": call.compaction_output,
                "usd": call.usd,
            },
            "usage": usage.as_json(),
        }

    def _priced(self, usage: ModelUsage) -> ModelUsage:
        if usage.usd is not None:
            return usage
        # Every billed class: one-hour writes, a compaction, the prompt's tier.
        usd = prices.cost(usage.model, prices.Tokens.of(usage), self.settings.prices)
        return usage if usd is None else usage.model_copy(update={"usd": usd})

    # -- what the gateway learns -------------------------------------------------------------

    def streaming_to(self, thread_id: str, model: str | None) -> Callable[[str], None] | None:
        thread = self.threads.get(thread_id)
        if thread is None or not self.live.listening(thread_id):
            return None
        if model is not None and bare_model(thread.spec.model) != model:
            return None
        return RuntimeTurn(self, thread).streamed

    def usage_coming(self, thread_id: str) -> None:
        """The gateway passed a reply's final count on; ``record_usage`` logs it next."""
        thread = self.threads.get(thread_id)
        if thread is not None:
            thread.counting += 1

    async def record_usage(
        self, thread_id: str, usage: ModelUsage, *, warned: bool = False
    ) -> None:
        """The provider's count for a call the gateway forwarded, logged as that call's
        ``model.usage`` (after the staged warning it carried, when ``warned``); dropped (and
        said) for a thread this runtime does not hold."""
        thread = self.threads.get(thread_id)
        if thread is None:
            log.warning("gateway_usage_dropped", thread=thread_id)
            return
        side = usage.side or not _same_model(usage.model, thread.spec.model)
        batch: list[Event] = []
        if warned and thread.warning is not None:
            batch.append(thread.warning)
            thread.warning = None
        batch.append(usage.model_copy(update={"at": self.clock(), "side": side}))
        try:
            await self.append(thread, batch)
        finally:
            thread.counting = max(thread.counting - 1, 0)
            thread.notify()

    async def counted(self, thread: Thread) -> None:
        """Wait (a little) until every count the gateway announced for ``thread`` is in the
        log: a decision on the view must not miss the last call's count."""
        with anyio.move_on_after(COUNT_WAIT_SECONDS):
            while thread.counting:
                await thread.changed.wait()

    def gate(self, thread_id: str) -> int | None:
        """The request size above which the gateway holds a request for ``admit``."""
        thread = self.threads.get(thread_id)
        return None if thread is None else admission.gate(self, thread)

    def receipts(self, thread_id: str) -> Mapping[str, str]:
        thread = self.threads.get(thread_id)
        return {} if thread is None else admission.receipts(thread)

    def clamps(self, thread_id: str) -> Clamps:
        thread = self.threads.get(thread_id)
        return Clamps() if thread is None else admission.clamps(thread)

    async def admit(self, thread_id: str, size: int, ids: Sequence[str]) -> Admission:
        thread = self.threads.get(thread_id)
        if thread is None:
            return Admission(True)
        return await admission.admit(self, thread, size, ids)

    def rewrites(self, thread_id: str) -> bool:
        thread = self.threads.get(thread_id)
        return thread is not None and admission.rewrites(thread)

    def reset_cut(self, thread_id: str) -> ResetCut | None:
        thread = self.threads.get(thread_id)
        if thread is None:
            return None
        return attached.cut(thread) if thread.spec.attached else admission.reset_cut(thread)

    def person_notice(self, thread_id: str) -> str | None:
        """A line for the person in their own CLI's conversation: the windows taken since
        they were last told."""
        thread = self.threads.get(thread_id)
        return None if thread is None else attached.notice(thread)

    async def heard(
        self, thread_id: str, conversation: list[tuple[int, Message]], model: str = ""
    ) -> bool:
        """A request of a person's own CLI session, on ``model``: its conversation goes to
        the log; True for the CLI's own compaction request (never held)."""
        thread = self.threads.get(thread_id)
        if thread is None or not thread.spec.attached:
            return False
        return await attached.heard(self, thread, conversation, model)

    def clamp_chars(self, thread_id: str) -> int | None:
        thread = self.threads.get(thread_id)
        return None if thread is None else thread.projection.clamp_chars

    async def caught_up(self, thread_id: str, newest: NewestResult | None) -> None:
        thread = self.threads.get(thread_id)
        if thread is not None:
            await admission.caught_up(thread, newest)

    def notices(self, thread_id: str, model: str, size: int) -> Notices:
        """What the thread's request on ``model`` of ``size`` tokens carries; a side call
        (another model) carries nothing."""
        thread = self.threads.get(thread_id)
        if thread is None or not _same_model(model, thread.spec.model):
            return Notices()
        return admission.notices(self, thread, size)

    def baseline(self, thread_id: str) -> int | None:
        thread = self.threads.get(thread_id)
        return None if thread is None else thread.projection.baseline_tokens

    def session_started(self, thread_id: str) -> None:
        """The thread's engine started a new session: a restart the gateway waited for is
        done."""
        thread = self.threads.get(thread_id)
        if thread is not None:
            thread.restart_pending = False

    async def provider_failing(self, thread_id: str, status: int, count: int) -> None:
        """The gateway relayed ``count`` errors in a row that the thread's CLI retries on its
        own: the operator is told (once for the run), unless the engine tells of its CLI's
        retries itself (a person's own CLI is no engine's: always told)."""
        thread = self.threads.get(thread_id)
        if thread is None:
            return
        if thread.profile.info.announces_retries and not thread.spec.attached:
            return
        stop = "" if thread.spec.attached else " (condensate stop ends it now)"
        text = (
            f"The provider answered {count} requests in a row with {status}; the CLI retries "
            f"on its own, and the turn runs until the provider answers or the CLI gives up{stop}."
        )
        await self.append(thread, SystemLine(at=self.clock(), code="provider-retrying", text=text))

    async def record_line(self, thread_id: str, code: str, text: str) -> None:
        """A system line the gateway has for the thread's log (dropped for a thread this
        runtime does not hold)."""
        thread = self.threads.get(thread_id)
        if thread is not None:
            await self.append(thread, SystemLine(at=self.clock(), code=code, text=text))

    async def record_baseline(self, thread_id: str, tokens: int, model: str) -> None:
        """A session's fixed part as its first request measured it (the provider's count less
        the conversation), logged when it differs from the thread's by more than 2 %; a side
        call's (another model's) is not the thread's."""
        thread = self.threads.get(thread_id)
        if thread is None or not _same_model(model, thread.spec.model):
            return
        if abs(tokens - thread.projection.baseline_tokens) > 0.02 * max(tokens, 1):
            await self.append(thread, BaselineMeasured(at=self.clock(), tokens=tokens))

    async def _write_and_fold(self, thread: Thread, batch: list[Event]) -> list[Stored]:
        counter = counter_for(thread.spec.model)

        def counts() -> list[int]:
            return [count_event(event, counter) for event in batch]

        # Counting text never seen takes a few ms a page: a large batch is counted off the loop.
        if small_batch(batch):
            tokens = counts()
        else:
            tokens = await anyio.to_thread.run_sync(counts)
        stored = await self.log.append(thread.thread_id, batch, tokens)
        for item in stored:
            thread.projection.apply(item)
            self.metrics.fold(thread.spec.engine, thread.spec.model, item.event)
        self.live.publish_logged(stored)
        if thread.projection.last_seq - thread.snapshot_at >= SNAPSHOT_EVERY:
            await self._snapshot(thread)
        return stored

    async def _snapshot(self, thread: Thread) -> None:
        """Serialize the state here, where nothing else mutates it, and write it off the loop."""
        upto, state = thread.projection.last_seq, snapshot.dump(thread.projection)
        saved = await self.log.save_snapshot(thread.thread_id, upto, state)
        thread.projection.apply(saved)
        thread.snapshot_at = upto
        self.live.publish_logged([saved])

    @property
    def default_engine(self) -> str:
        """The engine a thread created without one runs on."""
        return engines.default_engine(self.engines)

    def profile_of(self, engine: str) -> Profile:
        """The engine ``engine`` as this daemon runs it; an engine it does not run is refused
        with the ones it does."""
        if engine not in self.profiles:
            known = ", ".join(sorted(self.profiles))
            raise Refused(
                code="unknown-engine",
                detail=f"Engine {engine!r} is not one of: {known}.",
            )
        return self.profiles[engine]

    def engine_env(self, thread_id: str, profile: Profile) -> EngineEnv:
        """What the thread's engine needs from the settings (CLI engines keep state here)."""
        return EngineEnv(
            home=self.settings.home,
            thread_id=thread_id,
            anthropic_base_url=self.settings.anthropic_base_url,
            anthropic_api_key=self.settings.anthropic_api_key,
            openai_base_url=self.settings.openai_base_url,
            openai_api_key=self.settings.openai_api_key,
            settings=profile.settings,
            daemon_url=self.daemon_url,
            thread_token=thread_token(self.daemon_token, thread_id) if self.daemon_token else "",
            gateway=None
            if self.gateway_for is None or profile.info.gateway_api is None
            else self.gateway_for(thread_id, profile.info.gateway_api, profile.info.session_header),
        )

    async def release(self, thread_id: str) -> None:
        """Another daemon holds the thread now: its turn here is stopped and its engine
        closed, nothing more is written for it, and this runtime forgets it."""
        thread = self.threads.pop(thread_id, None)
        if thread is None:
            return
        thread.released = True
        self.live.gone(thread_id)
        if thread.turn_scope is not None:
            thread.turn_scope.cancel()
        with anyio.move_on_after(INTERRUPT_WAIT_SECONDS, shield=True):
            if thread.running:
                await thread.turn_done.wait()
            await thread.engine.close()

    def get(self, thread_id: str) -> Thread:
        thread = self.threads.get(thread_id)
        if thread is None:
            raise Refused(code="unknown-thread", detail=f"There is no thread {thread_id!r}.")
        return thread

    def usage(self, thread: Thread) -> ContextUsage:
        return measure(thread.projection, thread.window, thread.profile.ceilings)

    # -- threads and turns --------------------------------------------------------------------

    async def create(
        self, spec: ThreadSpec, thread_id: str | None = None, window: ModelWindow | None = None
    ) -> Thread:
        """Start a thread: its identity, its brief, and its first turn. ``window`` is the
        model's, when the caller has resolved it already. A thread that could only fail later
        is refused now, before anything is logged: a model its engine cannot run, a cwd that
        is no directory here, a provider the daemon holds no credential for."""
        profile = self.profile_for(spec)
        await self.refuse_unfit(spec)
        thread_id = thread_id or f"t-{uuid.uuid4().hex[:12]}"
        engine = self.engine_for(thread_id, spec, profile)
        window = window or await self.window_for(spec.model)
        thread = Thread(thread_id, spec, Projection(), window, engine, profile)
        self.threads[thread_id] = thread
        created = ThreadCreated(
            at=self.clock(),
            engine=spec.engine,
            model=spec.model,
            cwd=spec.cwd,
            persona=spec.persona,
            tools=spec.tools,
            permissions=spec.permissions,
            head=spec.head,
            parent=spec.parent,
            baseline_tokens=engine.baseline(spec),
            reset=spec.reset,
            recall=profile.info.recall,
            output_cap=spec.output_cap,
            clamp_tokens=profile.planner.tiers.clamp_tokens,
            near_limit_warnings=spec.near_limit_warnings,
            attached=spec.attached,
            attached_pid=spec.attached_pid,
        )
        # A person's own CLI session has no brief of its own: its first message is one.
        brief = (
            []
            if spec.attached
            else [
                UserMessage(
                    at=self.clock(), text=spec.brief, author="parent" if spec.parent else "human"
                )
            ]
        )
        await self.append(thread, [created, *brief])
        self.start_turn(thread, "human" if spec.parent is None else "child")
        log.info("thread_created", thread=thread_id, engine=spec.engine, model=spec.model)
        return thread

    def profile_for(self, spec: ThreadSpec) -> Profile:
        """The thread's engine as this daemon runs it for ``spec``. A person's own CLI
        session never restarts (the gateway applies a summary in flight), and has no
        ``recall``: the CLI runs without Condensate's tools, so a receipt says to read or run
        again. Its planner still plans as for a restart: the cut starts the prompt anew, so
        the kept tail is billed again as after one (the smaller tail share)."""
        profile = self.profile_of(spec.engine)
        if not spec.attached:
            return profile
        return replace(profile, info=replace(profile.info, restarts=False, recall=False))

    def engine_for(self, thread_id: str, spec: ThreadSpec, profile: Profile) -> EngineAdapter:
        """The thread's engine: its CLI the daemon runs, or a person's own session."""
        env = self.engine_env(thread_id, profile)
        engine = profile.info.make(spec, env)
        if not spec.attached:
            return engine
        session = attached.AttachedSession(engine, env.gateway, spec.attached_pid)
        if env.gateway is not None:
            session.attach()  # its pass good from now, before its turn (re)starts
        return session

    def attachment(self, thread: Thread) -> Attachment:
        """How a person's own CLI session reaches the gateway: its base URL and its pass."""
        if not isinstance(thread.engine, attached.AttachedSession):
            msg = f"Thread {thread.thread_id} is no CLI session a person runs."
            raise Refused(code="not-attached", detail=msg)
        return thread.engine.attachment or thread.engine.attach()

    def attach_url(self, thread: Thread) -> str:
        """The base URL a person's own CLI session is given (its pass in it)."""
        return self.attachment(thread).url

    async def detach(self, thread: Thread, exit_code: int) -> None:
        """A person's own CLI exited: its session's turn ends with its exit code."""
        if not isinstance(thread.engine, attached.AttachedSession):
            raise Refused(
                code="not-attached",
                detail=f"Thread {thread.thread_id} is no CLI session a person runs.",
            )
        thread.engine.end(exit_code)
        if thread.running:
            await thread.turn_done.wait()

    async def refuse_unfit(self, spec: ThreadSpec) -> None:
        """Refuse a thread that could only fail later (``create`` asks this first)."""
        profile = self.profile_of(spec.engine)
        try:
            provider = parse_model(spec.model).provider
        except ConfigError as exc:
            raise Refused(code="unknown-model", detail=str(exc)) from exc
        runs = profile.info.providers
        if runs and provider not in runs:
            detail = (
                f"The {profile.info.title} engine runs {' or '.join(p + ':' for p in runs)} "
                f"models; {spec.model!r} is a {provider}: model."
            )
            raise Refused(code="unsupported-model", detail=detail)
        if not await anyio.Path(spec.cwd).is_dir():
            detail = f"The cwd {spec.cwd!r} is not a directory on the daemon's machine."
            raise Refused(code="no-such-cwd", detail=detail)
        if not spec.attached and (wanted := missing_credential(self.settings, provider)):
            detail = (
                f"The daemon holds no {provider} credential, so {spec.model!r} cannot be "
                f"called: set {wanted}."
            )
            raise Refused(code="no-credential", detail=detail)

    async def steer(self, thread: Thread, text: str, *, pinned: bool = False) -> Stored:
        """A human message: joins the running turn at its next call, or starts a turn. It is
        logged at once; the view keeps a batch's results together around it."""
        if thread.spec.attached is not None:
            detail = (
                f"Thread {thread.thread_id} is a CLI a person runs in their own terminal: "
                "type there."
            )
            raise Refused(code="attached-session", detail=detail)
        (stored,) = await self.append(
            thread, UserMessage(at=self.clock(), text=text, pinned=pinned)
        )
        if not thread.running:
            self.start_turn(thread, "human")
        return stored

    def start_turn(
        self, thread: Thread, cause: Literal["human", "child", "resume", "queued"]
    ) -> None:
        if thread.running:
            return
        thread.running = True
        thread.interrupted = None
        thread.turn_done = anyio.Event()
        self._publish_status(thread)
        self.spawn_task(self._turn, thread, cause, name=f"turn {thread.thread_id}")

    def _publish_status(self, thread: Thread) -> None:
        """Tell the live channel the thread's status when it changed: a turn started or
        ended, or an approval was asked or answered (both are appends)."""
        status = thread.status
        if status != thread.published_status:
            thread.published_status = status
            self.live.status(thread.thread_id, status)

    async def interrupt(self, thread: Thread) -> bool:
        """End the running turn now (the operator asked); False when the thread is idle.

        An engine that can interrupt its own turn (``Interruptible``: the CLI engines) is
        asked first and given ``INTERRUPT_GRACE_SECONDS``; then, or at once for the native
        loop, the turn's scope is cancelled (its provider call and running tools with it).
        The turn ends ``interrupted`` with ``INTERRUPTED_BY_OPERATOR``, every open tool
        call closed with an error result; the thread is idle and a new message starts a new
        turn."""
        if not thread.running:
            return False
        thread.interrupted = INTERRUPTED_BY_OPERATOR
        done = thread.turn_done
        log.info("turn_interrupting", thread=thread.thread_id)
        engine = thread.engine
        if isinstance(engine, Interruptible):
            with anyio.move_on_after(INTERRUPT_GRACE_SECONDS):
                await engine.interrupt()
                await done.wait()
        if not done.is_set() and thread.turn_scope is not None:
            thread.turn_scope.cancel()
        with anyio.move_on_after(INTERRUPT_WAIT_SECONDS):
            await done.wait()
        return True

    async def _turn(
        self, thread: Thread, cause: Literal["human", "child", "resume", "queued"]
    ) -> None:
        outcome = TurnOutcome("failed", "the turn did not finish")
        notes: list[Event] = []
        try:
            with anyio.CancelScope() as scope:
                thread.turn_scope = scope
                if thread.interrupted is not None:
                    scope.cancel()  # interrupted before it began
                await self.append(thread, TurnStarted(at=self.clock(), cause=cause))
                outcome = await thread.engine.run_turn(RuntimeTurn(self, thread))
            if thread.interrupted is not None and outcome.outcome != "completed":
                outcome = TurnOutcome("interrupted", thread.interrupted, outcome.last_text)
        except CondensateError as exc:
            outcome = TurnOutcome("failed", str(exc))
            log.warning("turn_failed", thread=thread.thread_id, error=str(exc))
        except anyio.get_cancelled_exc_class():
            outcome = TurnOutcome("interrupted", STOPPED_BY_DAEMON)
            raise
        except Exception as exc:
            # A bug, or something an engine or a provider did that nobody foresaw: it ends
            # this turn, named in its log, and nothing else.
            cause_text = f"{type(exc).__name__}: {exc}"[:500]
            log.exception("turn_crashed", thread=thread.thread_id, error=cause_text)
            outcome = TurnOutcome("failed", f"the turn crashed ({cause_text})")
            notes.append(
                SystemLine(
                    at=self.clock(),
                    code="turn-crashed",
                    text=f"The turn crashed on an unexpected error: {cause_text}. The thread "
                    "is idle; a new message starts a new turn.",
                )
            )
        finally:
            thread.turn_scope = None
            try:
                with anyio.CancelScope(shield=True):
                    if not thread.released:  # else its new owner reports this turn
                        await self._close_turn(thread, outcome, notes)
            finally:
                thread.running = False
                thread.turn_done.set()
                self._publish_status(thread)
        # A stopped or failed turn would stop again on the same input: wait for a new one.
        # A person's own CLI session has one turn, the session: it ended with the CLI.
        attached = thread.spec.attached is not None
        if outcome.outcome == "completed" and unanswered_input(thread.projection) and not attached:
            self.start_turn(thread, "queued")

    async def _close_turn(self, thread: Thread, outcome: TurnOutcome, notes: list[Event]) -> None:
        if outcome.reason != STOPPED_BY_DAEMON and outcome.outcome != "completed":
            notes = [*notes, *self._closing_results(thread, outcome.reason)]
            # An approval the ended turn was waiting on can no longer run anything.
            await approvals.deny_pending(
                self, thread, f"the turn ended ({outcome.reason}) before an answer"
            )
        ended = TurnEnded(at=self.clock(), outcome=outcome.outcome, reason=outcome.reason)
        await self.append(thread, [*notes, ended])

    def _closing_results(self, thread: Thread, why: str) -> list[Event]:
        """An error result for every call the ended turn left open, so the view stays
        well-formed (every call answered) for the next turn."""
        return [
            ToolResult(
                at=self.clock(),
                call_id=call_id,
                tool=tool,
                output=f"Interrupted: the turn ended ({why}) before this call finished; it "
                "may have run in part. Check its effect before relying on it.",
                is_error=True,
            )
            for call_id, tool in open_calls(thread.projection)
        ]

    # -- the window check ---------------------------------------------------------------------

    async def checkpoint(self, thread: Thread) -> Checkpoint:
        """Measure, plan, and carry the decision out (``window_step``). Called before model
        calls (native) or at the engine's own checkpoint."""
        await self.counted(thread)
        if thread.spec.reset is not None:
            # The agent condenses its own context: nothing is cut for it (warnings advise).
            return Checkpoint(self.usage(thread))
        done = await window_step.step(self.host(thread), thread.profile.planner)
        return Checkpoint(done.usage, done.window, stop=done.stop, missed=done.missed)

    def host(self, thread: Thread) -> ThreadHost:
        """The window step's host for ``thread``."""
        return ThreadHost(self, thread)

    async def carry_out(self, thread: Thread, cut: Cut) -> Window | str:
        """The window taken, or why none could be (the summary did not arrive)."""
        result = None
        if cut.needs_curator:
            result = await self.curator.summarize(thread.projection, cut, thread.spec.model)
        window = carry_out(cut, result, thread.projection.last_seq, self.clock())
        ask = thread.projection.ask
        if window is not None and window.ask is None and ask is not None:
            # A window that overtakes an open ask closes it: the next crossing asks anew.
            window = window.model_copy(update={"ask": ask.ask_id})
        if window is None:
            return result.reason if isinstance(result, Miss) else "no summary"
        # The curator's calls are billed to the thread, as a side call (no anchor).
        spent = (
            [result.usage.logged(self.clock(), result.model, side=True)]
            if isinstance(result, Summary)
            else []
        )
        *_, stored = await self.append(thread, [*spent, window])
        assert isinstance(stored.event, Window)
        if window.window_kind in ("summary", "drop") and thread.profile.info.restarts:
            # The CLI's session now holds what the window cut: its requests go no further
            # until the engine starts the next session (see ``admission``).
            thread.restart_pending = self.gateway_for is not None
        log.info(
            "window_taken",
            thread=thread.thread_id,
            kind=window.window_kind,
            forced=window.forced,
            freed=cut.freed,
            author=window.author,
        )
        return stored.event

    # -- children -------------------------------------------------------------------------

    async def spawn_child(self, parent: Thread, brief: str, call_id: str, model: str | None) -> str:
        spec = ThreadSpec(
            engine=parent.spec.engine,
            model=model or parent.spec.model,
            cwd=parent.spec.cwd,
            brief=brief,
            persona=parent.spec.persona,
            tools=parent.spec.tools,
            permissions=parent.spec.permissions,
            head=False,
            parent=parent.thread_id,
        )
        child_id = f"t-{uuid.uuid4().hex[:12]}"
        await self.append(
            parent, ChildSpawned(at=self.clock(), child_id=child_id, brief=brief, call_id=call_id)
        )
        await self.create(spec, thread_id=child_id)
        return child_id

    async def join_child(self, parent: Thread, child_id: str, call_id: str) -> str:
        if child_id not in parent.projection.unjoined:
            raise Refused(
                code="unknown-child",
                detail=f"{child_id!r} is not an unjoined child of this thread.",
            )
        child = self.get(child_id)
        while child.running:
            await child.turn_done.wait()
        result = last_text(child.projection)
        await self.append(
            parent, ChildJoined(at=self.clock(), child_id=child_id, result=result, call_id=call_id)
        )
        return result


def _same_model(called: str, thread_model: str) -> bool:
    """``called`` (as the provider names it) is the thread's model (``provider:name``)."""
    bare = bare_model(thread_model)
    return not called or called == bare or called.startswith(bare)


async def _guarded(fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...], name: str) -> None:
    """Run one background task; an exception stays in it (logged once with its traceback)."""
    try:
        await fn(*args)
    except Exception as exc:
        log.exception("task_crashed", task=name, error=f"{type(exc).__name__}: {exc}"[:500])
