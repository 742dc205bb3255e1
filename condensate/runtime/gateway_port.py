"""What the runtime answers the gateway for a request it holds (``admission``): the clamps
its view shows, the agent's latest reset, the notices the request is due to carry, and what the
gateway found of the newest tool result. Dialect-neutral: each of the gateway's API dialects
applies them to requests in its own shape."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from condensate.core import clamps


@dataclass(frozen=True)
class Clamps:
    """The texts and calls of a thread's view that are clamped (``clamps``), as its CLI's
    requests carry them: a text block by its digest, a call by its id, each with the seq the
    log keeps its original at. Results are the receipts' (their clamped output by call id)."""

    cap: int = 0
    texts: Mapping[str, int] = field(default_factory=dict)
    calls: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.texts or self.calls)

    def text(self, text: str) -> str:
        """``text`` as the view shows it."""
        if len(text) <= self.cap:
            return text
        seq = self.texts.get(clamps.digest(text))
        return text if seq is None else clamps.clamp(text, self.cap, seq)


@dataclass(frozen=True)
class NewestResult:
    """The last tool result a request carries: its call, that call's tool, its size, and how
    much arrived with it."""

    call_id: str
    tool: str
    chars: int
    arrived: int = 0
    """Bytes of the request that its session's last counted one did not hold (the newest
    result and the call it answers among them): a character takes at least a byte, so
    nothing new is longer than this."""


@dataclass(frozen=True)
class ResetCut:
    """An agent-reset thread's latest committed reset, as the provider is to see it: the
    fixed context, then ``notice``, then the agent's ``condense`` call (``call_id``) and all
    that followed it. ``own_context`` opens the text blocks the CLI itself writes into the
    conversation (its environment, its instructions): fixed context, kept."""

    call_id: str
    notice: str
    own_context: tuple[str, ...] = ()
    at: int | None = None
    """Where the request starts again instead, by position in its conversation (a person's
    own CLI session's summary: the CLI keeps its history; the provider sees the summary, then
    the kept part)."""


@dataclass(frozen=True)
class Notice:
    """A text the thread's next request is due to carry: ``key`` says which (a level of the
    near-line notice, a staged warning's level), so that each is added once a session."""

    key: str
    text: str


@dataclass(frozen=True)
class Notices:
    """What the runtime says a request is due to carry beside what the CLI sent: a notice
    near the line; an agent-reset thread's staged warning."""

    near: Notice | None = None
    warning: Notice | None = None

    def due(self) -> tuple[Notice, ...]:
        return tuple(n for n in (self.near, self.warning) if n is not None)
