"""OpenHands SDK (``openhands-sdk``, on Python >= 3.12): an ``Agent`` in a ``LocalConversation``
with the SDK's own ``default_condenser`` — an ``LLMSummarizingCondenser`` (today ``max_size=80``
events, ``keep_first=4``, no ``max_tokens`` of its own, so the agent LLM's input limit is its
token trigger), given a copy of the agent's LLM as ``get_default_agent`` gives it. The agent
has the two tools (``read``, ``shell``) beside the SDK's built-in ``finish`` and ``think``; a
turn ends when the model answers with text (the conversation goes ``FINISHED``).

The LLM is LiteLLM's: ``anthropic/claude-*`` on the Anthropic Messages API at the base URL,
where the SDK marks cache breakpoints itself (prompt caching is on for these models), else
``openai/MODEL`` on Chat Completions at ``BASE/v1``. ``MODEL`` is the one the arm uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.peers._driver import ChildDriver
from benchmarks.peers._runner import (
    READ_DESCRIPTION,
    SHELL_DESCRIPTION,
    Reporter,
    Tools,
    read_job,
    run_turns,
)

PEER = "openhands"
MODULE = "benchmarks.peers.openhands"
MODEL = "claude-opus-5-5"
SUMMARY_PROMPT = "You are maintaining a context-aware state summary"
"""How the condenser's summary request (no tools) starts its system prompt: a router answers
it with a summary, not with the task's next step."""
ENV = {
    "OPENHANDS_SUPPRESS_BANNER": "1",
    # LiteLLM's bundled price and window table, not a download of the newest at import.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}


run = ChildDriver(PEER, MODULE, ENV)
"""The human turns through OpenHands' own loop; ``condenser_args`` replace
``LLMSummarizingCondenser`` settings of ``default_condenser`` (e.g. ``max_size``)."""


def litellm_model(model: str, base_url: str) -> tuple[str, str]:
    """LiteLLM's model name and base URL for a model the fake serves."""
    if model.startswith("claude-"):
        return f"anthropic/{model}", base_url
    return f"openai/{model}", base_url.rstrip("/") + "/v1"


def main() -> None:
    reporter = Reporter()
    job = read_job()
    tools = Tools(Path(job.workdir))
    # The SDK lives only in this peer's virtualenv, so it is imported in the child alone.
    from openhands.sdk import LLM, Agent, Conversation
    from openhands.sdk.context.condenser import LLMSummarizingCondenser, default_condenser
    from openhands.sdk.conversation.response_utils import get_agent_final_response
    from openhands.sdk.event import Condensation
    from openhands.sdk.tool import (
        Action,
        Observation,
        Tool,
        ToolDefinition,
        ToolExecutor,
        register_tool,
    )
    from pydantic import Field, SecretStr

    class ReadAction(Action):
        path: str = Field(description="The file's path, relative to the working directory.")

    class ShellAction(Action):
        command: str = Field(description="The bash command to run.")

    class TextObservation(Observation):
        pass

    class ReadExecutor(ToolExecutor):
        def __call__(self, action: Any, conversation: Any = None) -> Any:
            return TextObservation.from_text(tools.read(action.path))

    class ShellExecutor(ToolExecutor):
        def __call__(self, action: Any, conversation: Any = None) -> Any:
            return TextObservation.from_text(tools.shell(action.command))

    class ReadTool(ToolDefinition):
        @classmethod
        def create(cls, *args: Any, **params: Any) -> Sequence[Any]:
            return [
                cls(
                    description=READ_DESCRIPTION,
                    action_type=ReadAction,
                    observation_type=TextObservation,
                    executor=ReadExecutor(),
                )
            ]

    class ShellTool(ToolDefinition):
        @classmethod
        def create(cls, *args: Any, **params: Any) -> Sequence[Any]:
            return [
                cls(
                    description=SHELL_DESCRIPTION,
                    action_type=ShellAction,
                    observation_type=TextObservation,
                    executor=ShellExecutor(),
                )
            ]

    register_tool("read", ReadTool)
    register_tool("shell", ShellTool)
    name, base_url = litellm_model(job.model, job.base_url)
    llm = LLM(model=name, base_url=base_url, api_key=SecretStr("fake"), usage_id="agent")
    # As get_default_agent builds it: the default condenser on a copy of the agent's LLM.
    condenser_llm = llm.model_copy(update={"usage_id": "condenser"})
    condenser = default_condenser(condenser_llm)
    if job.condenser_args:
        settings = {"max_size": condenser.max_size, "keep_first": condenser.keep_first}
        condenser = LLMSummarizingCondenser(llm=condenser_llm, **{**settings, **job.condenser_args})
    agent = Agent(llm=llm, tools=[Tool(name="read"), Tool(name="shell")], condenser=condenser)

    condensed = [0]

    def on_event(event: Any) -> None:
        if isinstance(event, Condensation):
            condensed[0] += 1

    conversation = Conversation(
        agent=agent, workspace=job.workdir, callbacks=[on_event], visualizer=None
    )
    reporter.send(
        event="started",
        context_management=(
            f"LLMSummarizingCondenser(max_size={condenser.max_size}, "
            f"keep_first={condenser.keep_first}, max_tokens={condenser.max_tokens}) on "
            f"{name}; the agent LLM's input limit: {llm.effective_max_input_tokens}"
        ),
    )

    def answer(text: str) -> str:
        start = len(conversation.state.events)
        conversation.send_message(text)
        conversation.run()
        status = conversation.state.execution_status
        if status.value != "finished":
            msg = f"the conversation ended {status.value}, not finished"
            raise RuntimeError(msg)
        return str(get_agent_final_response(list(conversation.state.events)[start:]))

    run_turns(job, reporter, tools, answer, lambda: condensed[0])
    conversation.close()


if __name__ == "__main__":
    main()
