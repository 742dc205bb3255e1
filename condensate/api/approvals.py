"""What the approvals calls answer: the tool calls a thread with ``permissions: "ask"``
waits on, and an answer to one. Pure."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from condensate.api.answer import Answer, Moment


class Approval(Answer):
    """A tool call waiting for an operator."""

    id: str
    tool: str
    argument: str
    """The command or the path."""
    detail: str
    call_id: str | None = Field(alias="callId")
    requested_at: Moment = Field(alias="requestedAt")
    deadline: Moment
    """Denied when nobody answers by then."""


class Approvals(Answer):
    approvals: list[Approval]
    """Oldest first."""


class ApprovalAnswered(Answer):
    seq: int
    id: str
    decision: Literal["allow", "deny"]
