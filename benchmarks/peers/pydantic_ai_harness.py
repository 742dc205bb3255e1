"""Pydantic AI with pydantic-ai-harness: a Pydantic AI ``Agent`` with the context management
the harness's own coding agent (``Coder()``) composes, at its settings:
``ClearToolResults(max_fraction=0.7)`` (blanks old tool results, keeping the 3 most recent
pairs, once the history passes 70 % of the model's window as genai-prices records it), tool
results truncated over 64,000 characters, and prompt caching (``Caching()``). ``Coder()``
itself is not used whole: its tools are ``read_file``, ``grep``, ``delegate_task`` and the
rest, while the arms offer exactly ``read`` and ``shell``; nor are its instructions, which
describe those tools (the agent has no instructions, Pydantic AI's default).

The turns are one conversation: each ``agent.run`` gets the previous run's
``all_messages()``, which carry the compactions made so far. One departure, not about context:
Pydantic AI stops a run after 50 requests by default (``UsageLimits``); a human turn here may
take ``MAX_REQUESTS_PER_TURN``.

``claude-*`` models go to the Anthropic Messages API at the base URL (``AnthropicModel``:
cache breakpoints from the ``cache`` setting), others to Chat Completions at ``BASE/v1``
(``OpenAIChatModel``). ``MODEL`` is the one the arm uses.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from benchmarks.peers import Job
from benchmarks.peers._driver import ChildDriver
from benchmarks.peers._runner import (
    READ_DESCRIPTION,
    SHELL_DESCRIPTION,
    Reporter,
    Tools,
    read_job,
    run_turns,
)

PEER = "pydantic-ai"
MODULE = "benchmarks.peers.pydantic_ai_harness"
MODEL = "claude-opus-5-5"
SUMMARY_PROMPT: str | None = None
"""``ClearToolResults`` makes no model call of its own: every request is the agent's."""
CLEAR_TOOL_RESULTS = {"max_fraction": 0.7}
"""``Coder()``'s ``ClearToolResults`` settings."""
MAX_OUTPUT_CHARS = 64_000
"""``Coder()``'s truncation of a tool result (``coder.MAX_OUTPUT_CHARS``)."""
MAX_REQUESTS_PER_TURN = 500


run = ChildDriver(PEER, MODULE)
"""The human turns through Pydantic AI's own loop; ``condenser_args`` replace
``ClearToolResults`` settings (e.g. ``{"max_tokens": 2000}`` for ``max_fraction``)."""


def main() -> None:
    reporter = Reporter()
    job = read_job()
    tools = Tools(Path(job.workdir))
    # The libraries live only in this peer's virtualenv, so they are imported in the child.
    from pydantic_ai import Agent, Tool
    from pydantic_ai.capabilities import Caching
    from pydantic_ai.usage import UsageLimits
    from pydantic_ai_harness.compaction import ClearToolResults, resolve_context_window
    from pydantic_ai_harness.tool_output_limits import Band, ToolOutputLimits, Truncate

    condensed = [0]

    class CountedClearToolResults(ClearToolResults):
        """``ClearToolResults`` unchanged, counting the compactions that changed the history
        (``compact`` runs only once the trigger has fired)."""

        async def compact(self, messages: list[Any], ctx: Any) -> list[Any]:
            compacted: list[Any] = await super().compact(messages, ctx)
            if compacted is not messages:
                condensed[0] += 1
            return compacted

    class BoundToolOutputs(ToolOutputLimits):
        """As ``Coder()`` bounds tool results: truncation only, no spill-retrieval tool."""

        id: str | None = None

        def get_toolset(self) -> None:
            return None

    def read(path: str) -> str:
        return tools.read(path)

    def shell(command: str) -> str:
        return tools.shell(command)

    settings = {**CLEAR_TOOL_RESULTS, **job.condenser_args}
    clear = CountedClearToolResults(**settings)
    model = _model(job)
    agent = Agent(
        model,
        tools=[
            Tool(read, name="read", description=READ_DESCRIPTION),
            Tool(shell, name="shell", description=SHELL_DESCRIPTION),
        ],
        capabilities=[
            clear,
            BoundToolOutputs(
                id="coder_tool_output_limits",
                bands=[Band(over=MAX_OUTPUT_CHARS, action=Truncate(max_chars=MAX_OUTPUT_CHARS))],
            ),
            Caching(),
        ],
    )
    shown = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    reporter.send(
        event="started",
        context_management=(
            f"ClearToolResults({shown}, keep_pairs={clear.keep_pairs}) + tool results "
            f"truncated over {MAX_OUTPUT_CHARS} chars + Caching() on {model.system}:"
            f"{job.model}; window {resolve_context_window(model)}"
        ),
    )
    limits = UsageLimits(request_limit=MAX_REQUESTS_PER_TURN)
    history: list[Any] = []

    with asyncio.Runner() as loop:

        def answer(text: str) -> str:
            result = loop.run(agent.run(text, message_history=history, usage_limits=limits))
            history[:] = result.all_messages()
            return str(result.output)

        run_turns(job, reporter, tools, answer, lambda: condensed[0])


def _model(job: Job) -> Any:
    if job.model.startswith("claude-"):
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        provider = AnthropicProvider(base_url=job.base_url, api_key="fake")
        return AnthropicModel(job.model, provider=provider)
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    openai = OpenAIProvider(base_url=job.base_url.rstrip("/") + "/v1", api_key="fake")
    return OpenAIChatModel(job.model, provider=openai)


if __name__ == "__main__":
    main()
