"""Gateway passes: the credential a CLI session holds instead of the provider's key.

A pass names its thread and session and is signed with the daemon's secret (derived from its
token), so it is worth nothing to a provider or to another daemon; it is good only while its
session is its thread's current one, and the daemon knows no current session after a restart
but a person's own CLI session (``condensate claude``), which it takes up again with the same
pass. Issuing a thread's next pass retires the one before: a request from a session that is no
longer the thread's current one is refused. A pass is good under one API only, its thread's
engine's: a Claude Code session's pass cannot spend the OpenAI key, nor a Codex session's the
Anthropic one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

PREFIX = "cgw1"


@dataclass(frozen=True)
class Pass:
    thread_id: str
    session: str
    credential: str


class PassRefused(Exception):
    """A request whose pass is missing, forged, or from a retired session."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


MISSING = (
    "This is Condensate's model gateway: a request needs the pass the daemon gave its CLI "
    "session (as the API key or bearer token, or in the base URL: condensate claude and "
    "condensate codex give it)."
)
ATTACHED = "attached"
"""The session of a person's own CLI: one per thread, so its pass outlives a restart."""
FOREIGN = "The gateway pass was not issued by this daemon (or not since it started)."


@dataclass
class Passes:
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    current: dict[str, str] = field(default_factory=dict)
    """Thread -> its current session (its pass)."""
    engine_sessions: dict[str, str] = field(default_factory=dict)
    """Thread -> the engine's own id of its current session (Claude Code's session, Codex's
    thread): one process may run several in turn."""
    apis: dict[str, str] = field(default_factory=dict)
    """Thread -> the API its engine's CLI speaks (``EngineInfo.gateway_api``)."""
    session_headers: dict[str, str] = field(default_factory=dict)
    """Thread -> the request header in which its engine's CLI names its session (what the
    engine declares as ``EngineInfo.session_header``)."""

    @classmethod
    def of_token(cls, token: str) -> Passes:
        """Passes signed with a secret derived from the daemon's token: a person's CLI
        session keeps its pass across a restart of the daemon (its token is kept)."""
        return cls(secret=hmac.new(token.encode(), b"condensate gateway passes", "sha256").digest())

    def _mac(self, thread_id: str, session: str) -> str:
        message = f"{thread_id}.{session}".encode()
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()[:40]

    def issue(self, thread_id: str, api: str, session: str | None = None) -> Pass:
        """A new session for ``thread_id`` (a fresh one, unless ``session`` names it), good
        under ``api`` only; the thread's earlier session is retired."""
        session = session or secrets.token_hex(8)
        self.current[thread_id] = session
        self.apis[thread_id] = api
        self.engine_sessions.pop(thread_id, None)
        credential = f"{PREFIX}.{thread_id}.{session}.{self._mac(thread_id, session)}"
        return Pass(thread_id, session, credential)

    def retire(self, thread_id: str) -> None:
        self.current.pop(thread_id, None)
        self.apis.pop(thread_id, None)
        self.engine_sessions.pop(thread_id, None)

    def bind(self, thread_id: str, engine_session: str) -> None:
        self.engine_sessions[thread_id] = engine_session

    def session_named(self, credential: str, headers: Mapping[str, str]) -> str | None:
        """The engine session a request names, in the header its thread's engine uses (the
        credential's thread, before the credential is checked); None when it names none."""
        parts = credential.split(".")
        header = self.session_headers.get(parts[1]) if len(parts) == 4 else None
        value = headers.get(header, "").strip() if header else ""
        return value or None

    def check(self, credential: str, api: str, engine_session: str | None = None) -> Pass:
        """The pass ``credential`` is, if it is this daemon's, its session is current (and,
        when the request names the engine's session, that one is current too) and it was
        issued for ``api``."""
        parts = credential.split(".")
        if not credential.isascii() or len(parts) != 4 or parts[0] != PREFIX:
            code = "no-gateway-pass"
            raise PassRefused(code, MISSING)
        _, thread_id, session, mac = parts
        if not hmac.compare_digest(mac, self._mac(thread_id, session)):
            code = "invalid-gateway-pass"
            raise PassRefused(code, FOREIGN)
        if self.current.get(thread_id) != session:
            code = "stale-session"
            detail = (
                f"Session {session} is no longer thread {thread_id}'s current session; its "
                "requests are refused."
            )
            raise PassRefused(code, detail)
        if self.apis.get(thread_id) != api:
            code = "wrong-api"
            detail = (
                f"Thread {thread_id}'s pass is for the {self.apis.get(thread_id)} API, not "
                f"{api}: a session reaches its own engine's provider only."
            )
            raise PassRefused(code, detail)
        bound = self.engine_sessions.get(thread_id)
        if engine_session is not None and bound is not None and engine_session != bound:
            code = "stale-session"
            detail = (
                f"Session {engine_session} is no longer thread {thread_id}'s current session "
                f"({bound}); its requests are refused."
            )
            raise PassRefused(code, detail)
        return Pass(thread_id, session, credential)
