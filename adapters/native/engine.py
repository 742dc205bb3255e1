"""The native engine (``api``): Condensate's own agent loop over the provider clients.

The window check runs before every model call, including the calls that follow tool results.
A context refusal is logged, forces one window through the next check, and the call is made
once more. A head's own ``compact_context`` / ``compact_microcompact`` request is queued and
taken at the next check, in place of the curator's summary.

A call is answered with an error result, never run, when its arguments could not be read,
when it names a tool outside the thread's ``tools``, or when the thread's ``permissions``
forbid it (``permissions``); the turn goes on, so the model can correct itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog

from adapters.native.permissions import allows, needs_approval, permissions_problem
from adapters.native.tools import TOOLS, run_tool
from adapters.tool_contract import ToolContext, ToolOutcome
from condensate.core import near_limits, paging, reset
from condensate.core.context_tools import COMPACTION_TOOLS, CONTEXT_TOOLS
from condensate.core.messages import Completion, Message, Request, ToolSpec
from condensate.core.meter import ContextUsage
from condensate.core.projector import Projection
from condensate.core.prompt import shared_through, to_messages, with_notice
from condensate.core.staged_warnings import due_warning
from condensate.core.tokens import counter_for
from condensate.engine import EngineEnv, ThreadSpec, TurnContext, TurnOutcome
from condensate.errors import ContextWindowExceeded, ProviderError, Refused
from condensate.events import (
    AssistantMessage,
    CompactionRequested,
    Event,
    ModelRefused,
    SystemLine,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    UserMessage,
    Window,
)
from condensate.providers import parse_model
from condensate.runtime import emergency, tool_answers

log = structlog.get_logger()

MAX_CALLS_PER_TURN = 400
UNRUNNABLE_IN_A_ROW = 3
"""Replies in a row whose every tool call could not run (arguments that are no JSON object,
a tool the thread lacks) after which the turn stops: a model that keeps sending them would
otherwise be billed up to MAX_CALLS_PER_TURN times in seconds."""

SYSTEM_PROMPT = """You are a coding agent working in {cwd}. Use the tools to read, search, \
edit and run things; prefer small verified steps. Condensate manages your context: older \
results may be replaced by receipts (read or run again what you need) and older turns by a \
summary. If you want to decide what is kept yourself, call compact_context with your own \
summary, or compact_microcompact to clear old re-readable results."""
RESET_PROMPT = """You are a coding agent working in {cwd}. Use the tools to read, search, \
edit and run things; prefer small verified steps. You manage your own context: nothing is cut \
for you. When it fills (you are warned), save what you will need to continue (unfinished \
requests, decisions, file locations, next steps) in files with your tools, then call condense \
alone, with a short message to your future self if it helps. After it you start afresh from \
your notes."""
PAGED_OUTPUT_CHARS = 400_000
"""What a tool may put in the log when the thread pages its results (the view shows a
page of it): the tools' own cap is raised to this."""

CONTROL_TOOLS: dict[str, ToolSpec] = {
    "spawn": ToolSpec(
        "spawn",
        "Start a child agent on a sub-task. It works in its own context; join it for its result.",
        {
            "type": "object",
            "properties": {"brief": {"type": "string"}, "model": {"type": "string"}},
            "required": ["brief"],
        },
    ),
    "join": ToolSpec(
        "join",
        "Wait for a child agent to finish its turn and return its final answer. Without "
        "child_id, joins the most recently spawned child not yet joined.",
        {"type": "object", "properties": {"child_id": {"type": "string"}}},
    ),
    **{
        tool["name"]: ToolSpec(tool["name"], tool["description"], tool["schema"])
        for tool in CONTEXT_TOOLS
    },
}


def named_tools(spec: ThreadSpec) -> frozenset[str]:
    """The tools the spec names: all of them unless it names a subset. An agent-reset thread
    has ``condense`` in place of the compaction tools (nothing is windowed for it); no other
    thread has it, whatever its spec names."""
    named = frozenset(spec.tools or (*TOOLS, *CONTROL_TOOLS))
    if spec.reset is None:
        return named - {reset.TOOL}
    return (named - set(COMPACTION_TOOLS)) | {reset.TOOL}


def tool_specs(spec: ThreadSpec) -> tuple[ToolSpec, ...]:
    """The tools the thread is offered: those it names, less those its permissions forbid."""
    named = named_tools(spec)
    every = [ToolSpec(t.name, t.description, t.parameters) for t in TOOLS.values()]
    every += CONTROL_TOOLS.values()
    return tuple(t for t in every if t.name in named and allows(spec.permissions, t.name))


_PERMISSION_NOTES = {
    "workspace": "Your permissions are 'workspace': the file tools work only inside {cwd} "
    "and there is no shell.",
    "read-only": "Your permissions are 'read-only': you may read and search inside {cwd}, "
    "and change nothing.",
    "ask": "Your permissions are 'ask': each edit, write and shell call waits for a person to "
    "allow it; a denied call comes back with their reason.",
}


def system_prompt(spec: ThreadSpec) -> str:
    base = (SYSTEM_PROMPT if spec.reset is None else RESET_PROMPT).format(cwd=spec.cwd)
    if note := _PERMISSION_NOTES.get(spec.permissions):
        base = f"{base}\n\n{note.format(cwd=spec.cwd)}"
    return f"{spec.persona}\n\n{base}" if spec.persona else base


class NativeEngine:
    """Runs turns of one ``api`` thread."""

    def __init__(self, spec: ThreadSpec, env: EngineEnv | None = None) -> None:
        if problem := permissions_problem(spec.permissions):
            raise Refused(code="unsupported-permissions", detail=problem)
        self.spec = spec
        self.tools = tool_specs(spec)
        self.wanted = named_tools(spec)
        """The tools the spec names; one the permissions forbid is refused by ``run_tool``."""
        self.system = system_prompt(spec)
        self.sent: tuple[Message, ...] = ()
        """The messages of the thread's last request (where its cached prefix is found)."""
        self.tool_context = ToolContext(
            cwd=Path(spec.cwd),
            permissions=spec.permissions,
            off_limits=() if env is None else (env.home,),
        )
        if spec.output_cap is not None:
            # The view pages what is large: the log gets the output, not a cut of it.
            self.tool_context = replace(self.tool_context, output_cap=PAGED_OUTPUT_CHARS)

    def _notice(self, usage: ContextUsage) -> str | None:
        """The notice near the line the next request carries, when the thread asks for one
        (that request's only, after its messages: never in the history, and the cached
        prompt before it stays as it was)."""
        if not self.spec.near_limit_warnings or self.spec.reset is not None:
            return None
        return near_limits.notice(usage)

    def baseline(self, spec: ThreadSpec) -> int:
        counter = counter_for(spec.model)
        schemas = json.dumps(
            [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in self.tools
            ]
        )
        return counter.count(self.system) + counter.count(schemas)

    async def apply_window(self, window: Window) -> None:
        """Nothing to do: every call is projected from the log."""

    async def close(self) -> None:
        """Nothing to release: the loop holds no process."""

    async def run_turn(self, ctx: TurnContext) -> TurnOutcome:
        refused_once = False
        last_text = ""
        unrunnable = 0
        model = parse_model(ctx.spec.model).name
        for _ in range(MAX_CALLS_PER_TURN):
            check = await ctx.checkpoint()
            if check.stop is not None:
                return TurnOutcome("stopped", check.stop, last_text)
            sent_upto = ctx.view.last_seq
            messages = to_messages(ctx.view)
            warning = None
            if self.spec.reset is not None:
                warning = due_warning(ctx.view, self.spec.reset, check.usage, ctx.now())
            if warning is not None:
                messages = with_notice(messages, warning.text)
            request = Request(
                model=model,
                messages=tuple(messages),
                system=self.system,
                tools=self.tools,
                notice=self._notice(check.usage),
                cached_through=shared_through(self.sent, messages),
                cache_key=ctx.thread_id,
                on_text=ctx.streamed,
            )
            self.sent = request.messages
            try:
                reply = await ctx.client().complete(request)
            except ContextWindowExceeded as exc:
                await ctx.append(
                    ModelRefused(at=ctx.now(), message=str(exc), tokens=exc.tokens, limit=exc.limit)
                )
                if self.spec.reset is not None:
                    stop = await emergency.condense(
                        ctx, self.spec.reset, check.usage.window, sent_upto
                    )
                    if stop is not None:
                        return TurnOutcome("failed", stop, last_text)
                    continue
                if refused_once:
                    return TurnOutcome(
                        "failed",
                        "the provider refused the prompt again after a forced window",
                        last_text,
                    )
                refused_once = True
                continue
            except ProviderError as exc:
                await ctx.append(SystemLine(at=ctx.now(), code=exc.code, text=str(exc)))
                return TurnOutcome("failed", str(exc), last_text)
            refused_once = False
            last_text = reply.text or last_text
            thinking = tuple(
                ThinkingBlock(text=t.text, signature=t.signature) for t in reply.thinking
            )
            await ctx.append(
                [
                    # The warning the request carried, where the model read it (before the
                    # count that measured it): the next request's history is what this sent.
                    *([] if warning is None else [warning]),
                    reply.usage.logged(ctx.now(), reply.model, message_id=reply.message_id),
                    AssistantMessage(
                        at=ctx.now(),
                        text=reply.text,
                        thinking=thinking,
                        tool_calls=reply.tool_calls,
                        message_id=reply.message_id,
                    ),
                ]
            )
            if not reply.tool_calls:
                if _steered_since(ctx.view, sent_upto):
                    continue  # a steer arrived while this call ran: answer it in this turn
                return TurnOutcome("completed", "", last_text)
            for call in reply.tool_calls:
                if call.name == reset.TOOL and call.name in self.wanted:
                    await ctx.append(reset.answer(call, reply.tool_calls, sent_upto, ctx.now()))
                    continue
                await ctx.append(await self._answer(ctx, call, reply.invalid_arguments))
            unrunnable = unrunnable + 1 if self._none_runs(reply.tool_calls, reply) else 0
            if unrunnable >= UNRUNNABLE_IN_A_ROW:
                why = (
                    f"{unrunnable} replies in a row called tools that could not run (arguments "
                    "that are no JSON object, or tools this thread lacks); the turn stops "
                    "rather than call the model again"
                )
                await ctx.append(SystemLine(at=ctx.now(), code="tool-calls-unrunnable", text=why))
                return TurnOutcome("stopped", why, last_text)
        return TurnOutcome("stopped", f"{MAX_CALLS_PER_TURN} model calls in one turn", last_text)

    def _none_runs(self, calls: Sequence[ToolCall], reply: Completion) -> bool:
        """Whether no call of a reply could run."""
        return all(c.id in reply.invalid_arguments or c.name not in self.wanted for c in calls)

    async def _answer(
        self, ctx: TurnContext, call: ToolCall, invalid: Mapping[str, str]
    ) -> list[Event]:
        """The events answering one call: an error result for a call that must not run,
        else what running it produced."""
        if call.id in invalid:
            text = (
                f"{invalid[call.id]} The call was not run; call the tool again with a JSON "
                "object of its arguments."
            )
        elif call.name not in self.wanted:
            offered = ", ".join(t.name for t in self.tools) or "none"
            text = (
                f"{call.name!r} is not one of this thread's tools, so it was not run; "
                f"its tools are: {offered}."
            )
        else:
            return await self._run(ctx, call)
        return [
            ToolResult(at=ctx.now(), call_id=call.id, tool=call.name, output=text, is_error=True)
        ]

    async def _run(self, ctx: TurnContext, call: ToolCall) -> list[Event]:
        """The events one call produces: its result, and a queued compaction for the
        compaction tools."""
        args = call.arguments
        at = ctx.now()
        if call.name in TOOLS:
            if needs_approval(self.spec.permissions, call.name):
                shown = str(args.get("command") or args.get("path") or "")
                verdict = await ctx.approve(
                    call.name, shown, detail=json.dumps(dict(args)), call_id=call.id
                )
                if not verdict.allowed:
                    text = f"{call.name} was not run: {verdict.reason}"
                    return [
                        ToolResult(
                            at=ctx.now(),
                            call_id=call.id,
                            tool=call.name,
                            argument=shown[:120],
                            output=text,
                            is_error=True,
                        )
                    ]
            outcome = await run_tool(call.name, args, self.tool_context)
            return [_result(call, outcome, ctx.now())]
        try:
            match call.name:
                case "spawn":
                    child = await ctx.spawn(
                        str(args.get("brief", "")), call.id, _optional(args, "model")
                    )
                    text = f"Started child {child}. Call join with child_id={child!r}."
                    return [
                        ToolResult(
                            at=at, call_id=call.id, tool="spawn", argument=child, output=text
                        )
                    ]
                case "join":
                    child_id = str(args.get("child_id") or _latest_child(ctx.view))
                    result = await ctx.join(child_id, call.id)
                    return [
                        ToolResult(
                            at=at,
                            call_id=call.id,
                            tool="join",
                            argument=child_id,
                            output=result or "(the child gave no final answer)",
                        )
                    ]
                case "compact_context":
                    summary = str(args.get("summary", ""))
                    keep_from = args.get("keep_from")
                    return [
                        ToolResult(
                            at=at,
                            call_id=call.id,
                            tool=call.name,
                            output="Queued: your summary replaces the earlier context "
                            "before your next call.",
                        ),
                        CompactionRequested(
                            at=at,
                            mode="summary",
                            by="thread",
                            summary=summary,
                            keep_from=keep_from if isinstance(keep_from, int) else None,
                        ),
                    ]
                case "context_usage":
                    return [
                        ToolResult(
                            at=at,
                            call_id=call.id,
                            tool=call.name,
                            output=json.dumps(tool_answers.usage_answer(ctx, self.spec)),
                            category="control",
                        )
                    ]
                case "pin":
                    pinned = tool_answers.pin_answer(ctx.view, args, "thread", at)
                    answer = ToolResult(
                        at=at,
                        call_id=call.id,
                        tool=call.name,
                        output=pinned.text,
                        is_error=pinned.failed,
                        category="control",
                    )
                    return [answer] if pinned.event is None else [answer, pinned.event]
                case paging.RECALL_TOOL | paging.READ_TOOL:
                    text, failed = await tool_answers.read_back(ctx, call.name, call.arguments)
                    return [
                        ToolResult(
                            at=at,
                            call_id=call.id,
                            tool=call.name,
                            output=text,
                            is_error=failed,
                            category="control",
                        )
                    ]
                case "compact_microcompact":
                    return [
                        ToolResult(
                            at=at,
                            call_id=call.id,
                            tool=call.name,
                            output="Queued: older re-readable results are cleared "
                            "before your next call.",
                        ),
                        CompactionRequested(at=at, mode="microcompact", by="thread"),
                    ]
                case _:
                    return [
                        ToolResult(
                            at=at,
                            call_id=call.id,
                            tool=call.name,
                            output=(
                                f"Unknown tool {call.name!r}; the tools are: "
                                f"{', '.join(t.name for t in self.tools)}."
                            ),
                            is_error=True,
                        )
                    ]
        except Refused as exc:
            return [
                ToolResult(at=at, call_id=call.id, tool=call.name, output=str(exc), is_error=True)
            ]


def _result(call: ToolCall, outcome: ToolOutcome, at: Any) -> ToolResult:
    return ToolResult(
        at=at,
        call_id=call.id,
        tool=call.name,
        argument=outcome.argument,
        output=outcome.output,
        is_error=outcome.is_error,
    )


def _steered_since(view: Projection, seq: int) -> bool:
    """A human message was logged after ``seq`` (what the last request contained)."""
    for entry in reversed(view.entries):
        if entry.seq <= seq:
            return False
        if isinstance(entry.event, UserMessage) and entry.event.author == "human":
            return True
    return False


def _latest_child(view: Projection) -> str:
    return max(view.unjoined, key=lambda child: view.unjoined[child], default="")


def _optional(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    return str(value) if value else None
