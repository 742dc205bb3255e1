"""A reactive benchmark agent: a scripted *task*, not a scripted list of replies.

Each step of the task is a tool call the agent makes (read a file, run a command) and declares
what the agent must see to take it: a line of the file it edits, the traceback of the failure
it fixes, a line of a command's output it reasons about, the human's latest instruction. Before
each step the agent looks at the request it was sent (the prompt as the model would read it).
When a need is missing it first gets it back, paying the calls and tokens that costs:

- ``recall(seq)`` when a receipt in the request names the result the need came from and
  offers recall (Condensate's receipts say so where the thread has the tool);
- else the way the need says it can be had again: read the file again, run the command again;
- some things cannot be had again (a human message, the output of a one-off command): the
  step fails, and is counted.

A need still missing after its one attempt fails the step too (a re-read that a window
cleared again before the step). Re-thinking, when earlier thinking was dropped, is the fake's
own rule (``_thinking``): it is billed whoever sends the request.

The agent speaks each engine's tools through a ``Dialect`` (Claude Code's ``Read`` and
``Bash``, Codex's ``exec_command``, the native loop's and the peers' ``read`` and ``shell``).
It is pure: the caller hands it each request's body and says when a reply was answered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from condensate.testing.fake_model._script import Call, Reply, Text, ToolCalls

Kind = Literal["read", "run"]


@dataclass(frozen=True)
class Again:
    """How a need can be had again: the file read again, or the command run again."""

    kind: Kind
    target: str


@dataclass(frozen=True)
class Need:
    """A text the agent must see in its prompt to take a step."""

    snippet: str
    """Found verbatim in the request (chosen so that JSON leaves it as it is)."""
    what: str
    """What it is, for the report: "line 40 of src/report/cli.py"."""
    source: str | None
    """The target (path or command) of the step whose result holds it, which a receipt names;
    None for a human message."""
    again: Again | None
    """None: it cannot be had again (a human message, a one-off command's output)."""


@dataclass(frozen=True)
class Action:
    """One step: a tool call and what it needs to be taken."""

    kind: Kind
    target: str
    text: str
    needs: tuple[Need, ...] = ()


@dataclass(frozen=True)
class Turn:
    """A human turn: the message, the steps, and the answer that ends it (which needs the
    human's instruction)."""

    human: str
    actions: tuple[Action, ...]
    final: str
    final_needs: tuple[Need, ...] = ()


@dataclass(frozen=True)
class Dialect:
    """An engine's tools: how a read and a run are called, and where a path is rooted."""

    name: Literal["claude", "codex", "native"]
    workdir: str = ""

    def call(self, kind: Kind, target: str, text: str, ident: str) -> Call:
        if self.name == "codex":
            command = f"cat {target}" if kind == "read" else target
            return Call("exec_command", {"cmd": command}, id=ident)
        if self.name == "claude":
            if kind == "read":
                path = f"{self.workdir.rstrip('/')}/{target}" if self.workdir else target
                return Call("Read", {"file_path": path}, id=ident)
            return Call("Bash", {"command": target, "description": text[:60]}, id=ident)
        if kind == "read":
            return Call("read", {"path": target}, id=ident)
        return Call("shell", {"command": target}, id=ident)

    def recall(self, seq: int, ident: str) -> Call:
        """A call of Condensate's recall tool as the engine offers it: the native loop's own,
        Claude Code's by its MCP name, Codex's in the MCP server's namespace."""
        if self.name == "codex":
            return Call("recall", {"seq": seq}, id=ident, namespace="mcp__condensate")
        if self.name == "claude":
            return Call("mcp__condensate__recall", {"seq": seq}, id=ident)
        return Call("recall", {"seq": seq}, id=ident)


_RECEIPT = re.compile(r"\[receipt seq (\d+): [^\]]*?\((.*?)\), \d+ tokens cleared;([^\]]*)\]")


def receipts(prompt: str) -> list[tuple[int, str, bool]]:
    """(seq, argument, whether it offers ``recall``) of every receipt in the prompt."""
    return [
        (int(m.group(1)), m.group(2), "recall(seq=" in m.group(3))
        for m in _RECEIPT.finditer(prompt)
    ]


def prompt_text(body: Mapping[str, Any]) -> str:
    """What the model reads of a request: its system prompt and conversation, as JSON text
    (tool schemas left out: a snippet is never there)."""
    shown = {k: body.get(k) for k in ("system", "messages", "input", "instructions")}
    return json.dumps(shown, ensure_ascii=False)


@dataclass
class Failure:
    turn: int
    step: int
    need: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "step": self.step, "need": self.need, "why": self.why}


@dataclass
class ReactiveAgent:
    """Plays a task's turns against the requests it is sent. ``begin(turn)`` before a human
    turn; ``next(body)`` for each of the thread's requests; ``accept()`` once the provider
    answered it (a refused request changes nothing)."""

    turns: Sequence[Turn]
    dialect: Dialect
    turn: int = 0
    step: int = 0
    calls: int = 0
    extra_calls: int = 0
    recalls: int = 0
    refetches: int = 0
    overrun: int = 0
    """Requests past the end of a turn (answered with a short text)."""
    failures: list[Failure] = field(default_factory=list)
    _tried: set[str] = field(default_factory=set)
    _pending: tuple[str, Any] | None = None

    def begin(self, turn: int) -> None:
        self.turn, self.step = turn, 0
        self._tried = set()

    @property
    def failed_steps(self) -> int:
        return len({(f.turn, f.step) for f in self.failures})

    def next(self, body: Mapping[str, Any]) -> Reply:
        """The reply to one of the thread's requests (not yet taken: see ``accept``)."""
        prompt = prompt_text(body)
        current = self.turns[self.turn - 1] if 0 < self.turn <= len(self.turns) else None
        if current is None or self.step > len(current.actions):
            self._pending = ("overrun", None)
            return Text("Nothing more to do for this step.")
        ident = f"call_{self.turn}_{self.step}_{self.calls}"
        if self.step == len(current.actions):
            lost = [n for n in current.final_needs if n.snippet not in prompt]
            self._pending = ("final", lost)
            return Text(current.final)
        action = current.actions[self.step]
        for need in action.needs:
            if need.snippet in prompt or need.snippet in self._tried:
                continue
            fetch = self._fetch(need, prompt, ident)
            if fetch is not None:
                kind, call = fetch
                self._pending = (kind, need)
                return ToolCalls([call], text=f"I need {need.what} again first.")
        lost = [n for n in action.needs if n.snippet not in prompt]
        self._pending = ("step", lost)
        call = self.dialect.call(action.kind, action.target, action.text, ident)
        return ToolCalls([call], text=action.text)

    def _fetch(self, need: Need, prompt: str, ident: str) -> tuple[str, Call] | None:
        """Recall, when a receipt names the result and offers it; else the need's own way."""
        if need.source is not None:
            named = [
                seq
                for seq, argument, offered in receipts(prompt)
                if offered and need.source in argument
            ]
            if named:
                return "recall", self.dialect.recall(named[-1], ident)
        if need.again is not None:
            call = self.dialect.call(need.again.kind, need.again.target, need.what, ident)
            return "refetch", call
        return None

    def accept(self) -> None:
        """The last reply was answered: the agent moves on."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        kind, detail = pending
        self.calls += 1
        if kind == "overrun":
            self.overrun += 1
        elif kind in ("recall", "refetch"):
            self.extra_calls += 1
            self.recalls += kind == "recall"
            self.refetches += kind == "refetch"
            self._tried.add(detail.snippet)
        else:
            for need in detail:
                why = "cannot be had again" if need.again is None else "missing after a refetch"
                if need.snippet in self._tried:
                    why = "missing after a refetch"
                self.failures.append(Failure(self.turn, self.step, need.what, why))
            self.step += 1
            self._tried = set()

    def to_json(self) -> dict[str, Any]:
        return {
            "agent_calls": self.calls,
            "extra_calls": self.extra_calls,
            "recalls": self.recalls,
            "refetches": self.refetches,
            "failed_steps": self.failed_steps,
            "failures": [f.to_json() for f in self.failures[:50]],
            "overrun": self.overrun,
        }
