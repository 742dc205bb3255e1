"""The replay itself: ``replay`` runs a recording under each policy, each against a fresh fake.

A ``Run`` appends the recorded conversation again, in order, to a fresh in-memory log and lets
its policy take windows before each recorded model call; the fake bills each call with its
prompt cache. The recorded reply is appended whatever the fake answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp

from condensate.core.messages import Message, Request, Text, Thinking
from condensate.core.planner import Cut
from condensate.core.projector import Projection
from condensate.core.prompt import shared_through, to_messages
from condensate.core.retention import CallRecord, check, pair_problems
from condensate.core.summary import CuratorSettings, Miss, carry_out, replaced_entries
from condensate.core.tokens import Counter as TokenCounter
from condensate.core.tokens import bare_model, count_event, counter_for
from condensate.runtime.curator import Curator
from condensate.errors import CondensateError, ContextWindowExceeded
from condensate.events import (
    AssistantMessage,
    Event,
    ModelRefused,
    Stored,
    ThreadCreated,
    Window,
)
from condensate.providers import ModelClient
from condensate.providers._http import RetryPolicy
from condensate.providers.anthropic import AnthropicClient
from condensate.providers.windows import from_table
from condensate.replay.billing import Bill
from condensate.replay.config import DEFAULT_WINDOW, ReplayConfig
from condensate.replay.policies import Policy, make_policy
from condensate.replay.recording import EPOCH, Recording
from condensate.replay.report import PolicyResult, Report, windows_by_call
from condensate.replay.stand_in import FAKE_CURATOR, FAKE_CURATOR_MODEL, stand_in_summary
from condensate.testing.fake_model import FakeModelServer

MAX_ATTEMPTS = 3
FORGET_REQUESTS_EVERY = 50
SUMMARY_REQUEST = (
    "Your task is to create a detailed summary of the conversation so far, paying close "
    "attention to the user's explicit requests and your previous actions. Include the primary "
    "request and intent, key technical concepts, every file and code section examined, "
    "modified or created, errors and their fixes, problem solving, all user messages, pending "
    "tasks, the current work and the next step. Answer with the summary only."
)
"""The request a single-summary baseline appends to the view (Claude Code's compaction shape)."""


Progress = Callable[[str, int, int], None]
"""(policy, events done, events in all)"""


def _filler(tokens: int, counter: TokenCounter) -> str:
    """A system prompt of ``tokens`` tokens (to the token, as far as whole words allow),
    standing in for the recorded baseline: the replay's prompts are then the daemon's size,
    and its windows fall before the same calls."""
    unit = (
        "Rule {i}: keep each change small, read before you edit, run the tests after each "
        "edit, and report what failed and why."
    )
    per = max(counter.count(unit.format(i=1000)) + 1, 1)
    text = "\n".join(unit.format(i=i) for i in range(max(tokens // per - 1, 1)))
    size = counter.count(text)
    while size < tokens:
        padded = text + " ok"
        grown = counter.count(padded)
        if grown > tokens or grown == size:
            break
        text, size = padded, grown
    return text


@dataclass
class Run:
    """One policy over one recording, against one fake server."""

    recording: Recording
    policy: Policy
    config: ReplayConfig
    fake: FakeModelServer
    client: ModelClient
    curator: Curator
    curator_is_fake: bool
    counts: dict[int, int]
    counter: TokenCounter
    window: int
    system: str
    model: str
    history: list[Stored] = field(default_factory=list)
    view: Projection = field(default_factory=Projection)
    main: Bill = field(default_factory=Bill)
    summaries: Bill = field(default_factory=Bill)
    calls: list[CallRecord] = field(default_factory=list)
    sent: tuple[Message, ...] = ()
    """The messages of the last request (where its cached prefix is found again)."""
    summarized: set[int] = field(default_factory=set)
    windows: Counter[str] = field(default_factory=Counter)
    summaries_written: int = 0
    summary_tokens: list[int] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    holds: Counter[str] = field(default_factory=Counter)
    refusals: int = 0
    first_overflow_call: int | None = None
    cumulative: list[float] = field(default_factory=list)
    """Weighted input billed after each recorded model call."""
    now: datetime = EPOCH

    # -- the log ------------------------------------------------------------------------------

    def append(self, event: Event) -> Stored:
        tokens = self.counts.get(id(event))
        if tokens is None:
            tokens = count_event(event, self.counter)
        stored = Stored("replay", len(self.history) + 1, event, tokens)
        self.history.append(stored)
        self.view.apply(stored)
        return stored

    def take_window(self, window: Window) -> None:
        if window.window_kind == "summary":
            self.summarized.update(
                e.seq for e in replaced_entries(self.view, window.keep_from) if e.event is not None
            )
            self.summaries_written += 1
        stored = self.append(window)
        if window.window_kind == "summary":
            self.summary_tokens.append(stored.tokens)
        self.windows[window.window_kind] += 1

    @property
    def calls_made(self) -> int:
        return len(self.cumulative)

    # -- model calls --------------------------------------------------------------------------

    async def run(self, progress: Progress | None) -> None:
        recording = self.recording
        self.append(
            ThreadCreated(
                at=recording.events[0].at if recording.events else EPOCH,
                engine=recording.engine,
                model=recording.model,
                cwd="/replay",
                baseline_tokens=recording.baseline,
                clamp_tokens=self.policy.clamp_tokens(self),
            )
        )
        total = len(recording.events)
        for index, event in enumerate(recording.events):
            self.now = max(self.now, event.at)
            if isinstance(event, AssistantMessage):
                await self.call(event)
                if self.calls_made % FORGET_REQUESTS_EVERY == 0:
                    _forget_requests(self.fake)
            else:
                self.append(event)
            if progress is not None:
                progress(self.policy.name, index + 1, total)

    async def call(self, reply: AssistantMessage) -> None:
        for _ in range(MAX_ATTEMPTS):
            stop = await self.policy.before_call(self)
            if stop is not None:
                self.stopped.append(stop)
                break
            messages = _unsigned(to_messages(self.view))
            problems = tuple(pair_problems(messages))
            request = Request(
                model=self.model,
                messages=tuple(messages),
                cached_through=shared_through(self.sent, messages),
                system=self.system,
                max_tokens=8_192,
                stream=False,
            )
            self.sent = request.messages
            try:
                completion = await self.client.complete(request)
            except ContextWindowExceeded as exc:
                self.refusals += 1
                tokens = exc.tokens or 0
                self.calls.append(CallRecord(tokens, self.policy.limit(self), True, problems))
                if self.first_overflow_call is None:
                    self.first_overflow_call = self.calls_made + 1
                self.append(
                    ModelRefused(at=self.now, message=str(exc), tokens=exc.tokens, limit=exc.limit)
                )
                await self.policy.on_refused(self, exc)
                continue
            usage = completion.usage
            self.main.add(usage, output=self.counts.get(id(reply)))
            self.calls.append(CallRecord(usage.prompt, self.policy.limit(self), False, problems))
            self.append(usage.logged(self.now, self.model))
            break
        self.append(reply)
        self.cumulative.append(self.main.weighted + self.summaries.weighted)

    async def curator_summary(self, cut: Cut) -> Window | str:
        """Carry a summary cut out through ``Curator`` (the stand-in or a real model): the
        window, or why there is none."""
        if self.curator_is_fake:
            self.fake.queue(
                _text_reply(stand_in_summary(self.view, cut.keep_from)), model=FAKE_CURATOR_MODEL
            )
        result = await self.curator.summarize(self.view, cut, self.curator.settings.model or "")
        if not isinstance(result, Miss):
            self.summaries.add(result.usage)
        window = carry_out(cut, result, self.view.last_seq, self.now)
        if window is None:
            return result.reason if isinstance(result, Miss) else "no summary"
        return window

    async def summary_call(self) -> str | None:
        """The single-summary baseline's summary: the view plus a summary request, one call
        on the thread's model (its prefix is a cache read, as in Claude Code)."""
        messages = _unsigned(to_messages(self.view))
        request_text = Text(SUMMARY_REQUEST)
        if messages and messages[-1].role == "user":
            messages[-1] = Message("user", (*messages[-1].content, request_text))
        else:
            messages.append(Message("user", (request_text,)))
        self.fake.queue(_text_reply(stand_in_summary(self.view, None)), model=self.model)
        request = Request(
            model=self.model, messages=tuple(messages), system=self.system, stream=False
        )
        try:
            completion = await self.client.complete(request)
        except ContextWindowExceeded:
            self.refusals += 1
            return None
        self.summaries.add(completion.usage)
        return completion.text


def _unsigned(messages: list[Message]) -> list[Message]:
    """The messages without their signed thinking: a recording's blocks were signed for the
    conversation that produced them, and a provider that checks them refuses them anywhere
    else (as the fake does). A replay prices the rest."""
    out = []
    for message in messages:
        kept = tuple(b for b in message.content if not isinstance(b, Thinking))
        if len(kept) == len(message.content):
            out.append(message)
        elif kept:  # a turn of thinking alone leaves nothing to send
            out.append(Message(message.role, kept))
    return out


def _text_reply(text: str) -> Any:
    from condensate.testing.fake_model import Text as FakeText  # noqa: PLC0415

    return FakeText(text)


def _forget_requests(fake: FakeModelServer) -> None:
    """The fake logs every request body; a long replay needs the bills only."""
    state = fake._state  # the fake has no public way to drop its log but keep its cache
    with state._lock:
        state._log.clear()


def recording_window(recording: Recording, config: ReplayConfig) -> int:
    if config.window is not None:
        return config.window
    return from_table(bare_model(recording.model)) or DEFAULT_WINDOW


def _fake_model(recording: Recording) -> str:
    """The name the thread's calls use on the fake: the recorded one when tiktoken would not
    look for another encoding (a download, offline), else a Claude-like stand-in."""
    bare = bare_model(recording.model)
    return bare if bare.startswith("claude-") else f"claude-replay-{bare}"


async def replay(
    recording: Recording,
    config: ReplayConfig,
    *,
    curator_client_for: Callable[[str], ModelClient] | None = None,
    progress: Progress | None = None,
) -> Report:
    """Run ``recording`` through each policy in ``config``, each against a fresh fake."""
    prepared = _prepare(recording, config)
    results: dict[str, PolicyResult] = {}
    for name in config.policies:
        run = await _run_policy(prepared, name, curator_client_for, progress)
        results[name] = result_of(run)
    return Report(recording, config, prepared.window, _curator_model(config), results)


async def run_policy(recording: Recording, config: ReplayConfig, name: str) -> Run:
    """Run ``recording`` under the policy ``name`` against a fresh fake, with the stand-in
    curator: the finished run, its ``history`` the log a daemon would have written."""
    return await _run_policy(_prepare(recording, config), name, None, None)


@dataclass(frozen=True)
class _Prepared:
    """What every policy's run of one recording shares."""

    recording: Recording
    config: ReplayConfig
    counter: TokenCounter
    counts: dict[int, int]
    window: int
    system: str


def _prepare(recording: Recording, config: ReplayConfig) -> _Prepared:
    if not recording.events:
        msg = f"{recording.name} has no conversation to replay."
        raise CondensateError(msg)
    counter = counter_for("")
    return _Prepared(
        recording,
        config,
        counter,
        {id(e): count_event(e, counter) for e in recording.events},
        recording_window(recording, config),
        _filler(recording.baseline, counter),
    )


def _curator_model(config: ReplayConfig) -> str:
    if config.curator == FAKE_CURATOR:
        return f"anthropic:{FAKE_CURATOR_MODEL}"
    return config.curator


async def _run_policy(
    prepared: _Prepared,
    name: str,
    curator_client_for: Callable[[str], ModelClient] | None,
    progress: Progress | None,
) -> Run:
    config = prepared.config
    fake_curator = config.curator == FAKE_CURATOR
    async with (
        FakeModelServer(window=prepared.window) as fake,
        aiohttp.ClientSession() as session,
    ):
        client = AnthropicClient(
            fake.url, "replay", session=session, retry=RetryPolicy(max_retries=0)
        )

        def client_for(model: str, client: ModelClient = client) -> ModelClient:
            return client

        curator = Curator(
            CuratorSettings(model=_curator_model(config)),
            client_for if fake_curator or curator_client_for is None else curator_client_for,
        )
        run = Run(
            prepared.recording,
            make_policy(name, config),
            config,
            fake,
            client,
            curator,
            fake_curator,
            prepared.counts,
            prepared.counter,
            prepared.window,
            prepared.system,
            _fake_model(prepared.recording),
        )
        await run.run(progress)
    return run


def result_of(run: Run) -> PolicyResult:
    """What one policy's run came to."""
    sent = [c for c in run.calls if not c.refused]
    limits = [c.limit for c in run.calls]
    return PolicyResult(
        policy=run.policy.name,
        bill=run.main.merged(run.summaries),
        main=run.main,
        summaries=run.summaries,
        calls=run.calls_made,
        refusals=run.refusals,
        stopped=tuple(run.stopped),
        windows=dict(run.windows),
        summaries_written=run.summaries_written,
        summary_tokens_max=max(run.summary_tokens, default=0),
        peak_prompt=max((c.prompt for c in sent), default=0),
        limit=min(limits, default=run.policy.limit(run)),
        window=run.window,
        first_overflow_call=run.first_overflow_call,
        holds=dict(run.holds),
        retention=check(run.history, run.view, run.summarized, run.calls),
        cumulative=tuple(run.cumulative),
        taken=windows_by_call(e.event for e in run.history),
    )
