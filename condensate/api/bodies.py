"""What a request sends: the bodies of the API's calls, validated as they arrive. Pure."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from condensate.events import AskMode

INT64_MAX = 2**63 - 1
"""Integers in a body must fit SQLite's 64 bits; larger ones are refused before validation."""
BODY_TIMEOUT = 10.0
"""Seconds a request may take to send its whole body (the API's routes and the gateway's)."""


class _Body(BaseModel):
    """A request's body, read strictly as the document describes it: ``0`` is no boolean,
    ``"5"`` no integer (schemathesis sent both, and lax parsing took them)."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, use_attribute_docstrings=True, strict=True
    )


class ResetBody(_Body):
    """``"reset"``: the thread's agent condenses its own context (a ``condense`` tool with a
    note to its future self); nothing is cut for it."""

    warnings: list[float] = Field(default_factory=lambda: [0.75, 0.80, 0.85, 0.90], max_length=16)
    """Shares of the input budget at which the agent is warned, ascending, each in (0, 1]."""
    budget: int | None = Field(default=None, gt=0, le=INT64_MAX)
    """The input budget the warnings measure against (default: the model's window)."""
    emergency_model: str | None = Field(default=None, alias="emergencyModel")
    """The model that summarizes the whole view when the provider refuses a prompt as too
    long (default: none; such a refusal then stops the turn)."""

    @field_validator("warnings")
    @classmethod
    def _ascending(cls, value: list[float]) -> list[float]:
        if any(not 0 < level <= 1 for level in value):
            msg = "each warning level is a share of the budget, above 0 and at most 1"
            raise ValueError(msg)
        if value != sorted(set(value)):
            msg = "warning levels must ascend, each once"
            raise ValueError(msg)
        return value


class CreateThread(_Body):
    engine: str | None = None
    """One of the engines the daemon runs (``GET /openapi.json`` lists them); none: its
    default engine."""
    model: str = Field(examples=["anthropic:claude-opus-5-5"])
    cwd: str = Field(examples=["/home/me/src/project"])
    brief: str = Field(min_length=1, examples=["Make the failing tests pass."])
    persona: str = ""
    tools: list[str] = Field(default_factory=list)
    permissions: str = "default"
    head: bool = False
    """A head faces an operator: its line is the model's window less the reserves, and on the
    CLI engines it is asked to compact rather than cut. Only when asked for."""
    reset: ResetBody | None = None
    """Agent-reset mode: the agent condenses its own context; absent: Condensate windows it."""
    output_cap: int | None = Field(default=None, alias="outputCap", gt=0, le=1_000_000)
    """Tokens of a tool result the view shows; a larger one is paged: its beginning and a
    reference to read the rest by (the log keeps it all). Absent: results are not paged."""
    near_limit_warnings: bool = Field(default=False, alias="nearLimitWarnings")
    """Each request near the line carries an URGENT (70 % of the line) or CRITICAL (90 %)
    notice in its system prompt, that request only (on the CLI engines the gateway adds it)."""


class Attach(_Body):
    """``POST /attach``: a thread for a CLI a person runs in their own terminal
    (``condensate claude``): the daemon answers how to start it through the gateway."""

    engine: str
    """An engine whose CLI a person can run (``claude``, ``codex``)."""
    cwd: str = Field(examples=["/home/me/src/project"])
    args: list[str] = Field(default_factory=list, max_length=1000)
    """The CLI's own arguments: its engine reads the model they name (else its default)."""
    manage: bool = True
    """False: through the gateway for costs and logging only, no window taken."""
    head: bool = False
    """A head: its line is the model's window less the reserves, and Condensate asks before
    it cuts (the ask ends the CLI's turn with a line saying so; ``condensate compact``
    answers it), never cutting on its own initiative but at the ask's deadline."""
    pid: int | None = Field(default=None, gt=0, le=4_194_304)
    """The wrapper's process: the session ends when it is gone."""


class Detach(_Body):
    """``POST /threads/:id/detach``: the person's CLI exited."""

    exit_code: int = Field(alias="exitCode", ge=-255, le=255)


class SendMessage(_Body):
    text: str = Field(min_length=1)
    pinned: bool = False


class PinMessage(_Body):
    """``POST /threads/:id/pins``: the seq of a message to keep through every tier."""

    seq: int = Field(ge=1, le=INT64_MAX)


class Interrupt(_Body):
    """``POST /threads/:id/interrupt`` takes no body, or an empty object."""


class ApprovalAnswer(_Body):
    """``POST /threads/:id/approvals``: allow or deny one pending request."""

    id: str = Field(min_length=1)
    decision: Literal["allow", "deny"]
    reason: str = ""


class CompactAnswer(_Body):
    mode: AskMode
    keep_from: int | None = Field(default=None, alias="keepFrom", ge=1, le=INT64_MAX)
    summary: str | None = None
    reason: str = ""
    by: Literal["operator", "thread"] = "operator"
    seat: str | None = None
    """The session the answer is for: ``main`` or the thread's session id (a thread has one
    session at a time, so ``seat-required`` is never answered)."""
