"""The APIs the gateway speaks, one module each behind one small protocol: what an API's
requests hold and how the gateway changes them in flight, what its replies count, how its
errors and Condensate's own replies are worded. ``anthropic``: the Messages API (Claude
Code); ``openai``: the Responses API (Codex). A new API is a module here and a line in
``DIALECTS``; nothing else in the gateway branches on the API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

from condensate.core.messages import Message
from condensate.gateway.binding import Kept, Ledger
from condensate.gateway.dialects import anthropic, openai
from condensate.gateway.wire import EventEdits, Insertion, ReplyUsage, RequestShape
from condensate.runtime.gateway_port import Clamps, NewestResult, Notice, ResetCut

Api = Literal["anthropic", "openai"]


class Dialect(Protocol):
    """One API's wire format, as the gateway needs it (a module satisfies it)."""

    PATHS: frozenset[str]
    """The endpoints whose requests are model calls: the path after ``/gateway/<api>/``,
    as the CLI appends it to its base URL."""
    REPLY_PREFIX: str
    ENDPOINTS_TEXT: str
    """The endpoints it forwards, as a refusal names them."""
    MAX_REQUEST: int
    """The largest request forwarded, in bytes: a larger one is refused unread (413)."""
    MAX_REQUEST_TEXT: str

    def side_request(self, headers: Mapping[str, str]) -> bool:
        """Whether a model request is a subagent's (or another side context's), not the
        thread's conversation: forwarded as sent, billed as a side call, measured nothing."""
        ...

    def subscription(self, headers: Mapping[str, str]) -> bool:
        """Whether a request carries a subscription's sign-in that the API itself does not
        take (ChatGPT's): a person's own CLI on it is forwarded to the subscription's
        backend."""
        ...

    def endpoint(self, method: str, tail: str) -> bool:
        """Whether the gateway forwards ``method`` on ``tail`` (the path after
        ``/gateway/<api>/``): only what the API's CLI uses, with the real credential."""
        ...

    def binds(self, model: str) -> bool:
        """Whether the model binds its thinking (reasoning) to what came before it."""
        ...

    def keep(
        self,
        body: Mapping[str, Any],
        original: Mapping[str, Any],
        ledger: Ledger,
        count: Callable[[str], int],
    ) -> Kept:
        """``body`` with the thinking whose binding the gateway's changes broke taken out."""
        ...

    def with_cache_mark(self, body: Mapping[str, Any], new: set[str]) -> dict[str, Any]:
        """``body`` marked where the provider's cache can be read again after a change."""
        ...

    def error_body(self, status: int, code: str, message: str) -> dict[str, Any]:
        """An error as the provider would word it, so the CLI shows it and retries (or
        not) the way it does for the provider's own."""
        ...

    def shape(self, body: Mapping[str, Any]) -> RequestShape: ...

    def read_body(self, into: ReplyUsage, body: Any) -> None: ...

    def read_event(self, into: ReplyUsage, data: Any) -> None: ...

    def held_reply(self, model: str, text: str, reply_id: str) -> dict[str, Any]: ...

    def held_stream(self, model: str, text: str, reply_id: str) -> bytes: ...

    def result_ids(self, body: Mapping[str, Any]) -> list[str]: ...

    def newest_result(self, body: Mapping[str, Any]) -> NewestResult | None: ...

    def with_receipts(
        self, body: Mapping[str, Any], receipts: Mapping[str, str]
    ) -> tuple[dict[str, Any], int]: ...

    def with_clamps(self, body: Mapping[str, Any], found: Clamps) -> tuple[dict[str, Any], int]: ...

    def with_reset(self, body: Mapping[str, Any], cut: ResetCut) -> tuple[dict[str, Any], bool]: ...

    def without_notices(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """``body`` without the lines for the person the gateway put first in earlier replies
        (the provider never sent them); None when it holds none."""
        ...

    def noticed_reply(self, reply: Any, text: str) -> Any:
        """A reply (not streamed) with a line for the person first (as it was, where the API
        takes none)."""
        ...

    def noticed_stream(self, text: str) -> EventEdits | None:
        """What puts a line for the person first in a streamed reply (None: the API takes
        none)."""
        ...

    def conversation(self, body: Mapping[str, Any]) -> list[tuple[int, Message]]:
        """The request's conversation, provider-neutral, each message with its position in
        the request (where ``ResetCut.at`` may start it again)."""
        ...

    def insertion_at_end(self, body: Mapping[str, Any], notice: Notice) -> Insertion | None: ...

    def with_insertions(
        self, body: Mapping[str, Any], insertions: Sequence[Insertion]
    ) -> tuple[dict[str, Any], tuple[str, ...]]: ...


DIALECTS: dict[Api, Dialect] = {"anthropic": anthropic, "openai": openai}
APIS: tuple[Api, ...] = tuple(DIALECTS)


def dialect(api: Api) -> Dialect:
    return DIALECTS[api]
