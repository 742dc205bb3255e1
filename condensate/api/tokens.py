"""A thread's own token: what the tools a CLI thread calls the API with (its MCP server) hold
in place of the daemon's token. It is good for that thread's own tool routes only
(``POST /threads/:id/tools/:name`` and ``POST /threads/:id/compact``), and it is what lets a
compaction be authored by the thread itself (``by: "thread"``): a process that reads it from
the CLI's environment can do no more than the thread's agent can."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "ct1"


def thread_token(daemon_token: str, thread_id: str) -> str:
    """The token of ``thread_id``, derived from the daemon's (so nothing is stored)."""
    return f"{PREFIX}.{thread_id}.{_mac(daemon_token, thread_id)}"


def thread_of(token: str, daemon_token: str) -> str | None:
    """The thread ``token`` is the own token of, or None when it is none's."""
    prefix, _, rest = token.partition(".")
    thread_id, _, mac = rest.rpartition(".")
    if prefix != PREFIX or not thread_id or not token.isascii():
        return None
    return thread_id if hmac.compare_digest(mac, _mac(daemon_token, thread_id)) else None


def _mac(daemon_token: str, thread_id: str) -> str:
    digest = hmac.new(daemon_token.encode(), f"thread:{thread_id}".encode(), hashlib.sha256)
    return digest.hexdigest()[:40]
