"""Preserved thinking (Anthropic): the signed thinking blocks the fake issued and the checks a
request's thinking blocks must pass on the models that run them. Pure and thread-safe; no I/O.

Sources, all under https://platform.claude.com/docs/en/build-with-claude/preserved-thinking
(the overview, ``prefix-checks`` and ``fix-bound-to-a-different-conversation``):

- Each model reads its own blocks and a fixed set of others'; a block it cannot read "is
  dropped from that request without an error" (``_models.can_read``).
- "A tampered or undecryptable signature ... always returns a 400 (Invalid `signature` in
  `thinking` block with no sentence about the conversation)": an unknown signature, or a block
  whose text is not what the fake sent.
- The prefix: "The top-level `system` prompt, `tools`, and `messages` before the block are its
  prefix"; thinking blocks are not in it and "neither are `cache_control` markers"; values are
  compared, not bytes. "With server-side compaction, the checked prefix starts at the most
  recent compaction block."
- The chain: "the thinking blocks you keep must be an unbroken run of the original sequence".
- The fake is a new account: a failed check is a 400 unless the request sets
  ``thinking.block_binding.prefix_mismatch_behavior: "drop_block"``; then the failing block and
  every thinking block after it are dropped.
- Re-thinking: "a session's token usage might still increase because Claude can sometimes think
  more to re-create the dropped thinking". The fake's estimate (stated, not documented): a
  reply whose turn comes back without a valid copy of its block costs that block's thinking
  tokens again as output, once per block.

Stated, not documented: the reason sentence for a chain failure, and that blocks of models
that run no check pass the prefix and chain checks.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from condensate.testing.fake_model._accounting import count_text
from condensate.testing.fake_model._models import can_read, runs_thinking_check
from condensate.testing.fake_model._parts import Part, Section, digest_of

BINDING_BETA = "thinking-binding-controls-2026-08-01"
Reason: TypeAlias = Literal["prefix_binding_mismatch", "model_binding_mismatch"]


@dataclass(frozen=True)
class PrefixPart:
    digest: bytes
    section: Section
    path: str


def prefix_of(parts: Sequence[Part]) -> tuple[PrefixPart, ...]:
    """The parts a block coming after ``parts`` is bound to: all but thinking blocks."""
    return tuple(PrefixPart(p.digest, p.section, p.path) for p in parts if not p.is_thinking)


@dataclass(frozen=True)
class Issued:
    """A thinking block the fake sent: who wrote it, its text as sent, the tokens it was billed,
    the block before it in the request that produced it, and its prefix."""

    model: str
    text: str
    tokens: int
    predecessor: str | None
    prefix: tuple[PrefixPart, ...]


@dataclass(frozen=True)
class Dropped:
    path: str
    reason: Reason

    def to_json(self) -> dict[str, str]:
        return {"type": "thinking_dropped", "path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class Outcome:
    """The check of one request: how many thinking blocks it carried, which the model does not
    read (``dropped``), the 400 message if refused, the block a new one follows, and the
    thinking tokens to re-create (per lost block, not charged before)."""

    checked: int = 0
    dropped: tuple[Dropped, ...] = ()
    refusal: str | None = None
    predecessor: str | None = None
    rethink: Mapping[str, int] | None = None

    @property
    def dropped_paths(self) -> frozenset[str]:
        return frozenset(d.path for d in self.dropped)

    @property
    def rethink_tokens(self) -> int:
        return sum((self.rethink or {}).values())


@dataclass(frozen=True)
class Carried:
    """A compaction block the request carries: its place in the prefix and the parts it
    summarized (the digests of the summarizing request's parts)."""

    part: PrefixPart
    covered: tuple[bytes, ...]


class ThinkingLedger:
    """Every thinking block the fake issued, which reply carried which block, and which lost
    blocks were already re-created."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued: dict[str, Issued] = {}
        self._replies: dict[bytes, str] = {}
        self._charged: set[str] = set()
        self._count = 0

    def issue(self, block: Issued) -> str:
        with self._lock:
            self._count += 1
            seed = f"{self._count}|{block.model}|{block.text}".encode()
            signature = "fakesig" + hashlib.sha256(seed).hexdigest()[:40]
            self._issued[signature] = block
            return signature

    def get(self, signature: str) -> Issued | None:
        with self._lock:
            return self._issued.get(signature)

    def remember_reply(self, content: Sequence[Mapping[str, Any]], signature: str) -> None:
        """``content`` is the reply's blocks other than its thinking block."""
        digest = reply_digest([digest_of("messages", "assistant", b) for b in content])
        with self._lock:
            self._replies[digest] = signature

    def reply_block(self, digest: bytes) -> str | None:
        with self._lock:
            return self._replies.get(digest)

    def charge(self, signatures: Sequence[str]) -> None:
        with self._lock:
            self._charged.update(signatures)

    def charged(self, signature: str) -> bool:
        with self._lock:
            return signature in self._charged

    def clear(self) -> None:
        with self._lock:
            self._issued.clear()
            self._replies.clear()
            self._charged.clear()


def reply_digest(digests: Sequence[bytes]) -> bytes:
    return hashlib.sha256(b"".join(digests)).digest()


def thinking_enabled(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


def drop_requested(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    binding = thinking.get("block_binding") if isinstance(thinking, Mapping) else None
    if not isinstance(binding, Mapping):
        return False
    return binding.get("prefix_mismatch_behavior") == "drop_block"


def check(
    ledger: ThinkingLedger,
    model: str,
    parts: Sequence[Part],
    *,
    drop_block: bool,
    beta: bool,
    thinking_on: bool,
    carried: Carried | None = None,
) -> Outcome:
    """Checks the request's thinking blocks as sent (``parts``) for ``model``."""
    blocks = [(i, p) for i, p in enumerate(parts) if p.is_thinking]
    if not runs_thinking_check(model):
        known = [p.signature for _, p in blocks if ledger.get(p.signature) is not None]
        return Outcome(predecessor=known[-1] if known else None)
    issued: list[tuple[int, Part, Issued]] = []
    for i, part in blocks:
        record = ledger.get(part.signature)
        if record is None or (
            part.kind == "thinking" and part.block.get("thinking") != record.text
        ):
            message = f"{part.path}: Invalid `signature` in `thinking` block."
            return Outcome(checked=len(blocks), refusal=message)
        issued.append((i, part, record))
    dropped = [
        Dropped(p.path, "model_binding_mismatch")
        for _, p, record in issued
        if not can_read(model, record.model)
    ]
    unread = {d.path for d in dropped}
    present = [(i, p, r) for i, p, r in issued if p.path not in unread]
    for n, (i, part, record) in enumerate(present):
        if not runs_thinking_check(record.model):
            continue
        reason = _prefix_reason(record.prefix, prefix_of(parts[:i]), part.path, carried)
        if reason is None and n > 0 and record.predecessor != present[n - 1][1].signature:
            reason = "A thinking block before this one was left out or moved."
        if reason is None:
            continue
        if not drop_block:
            return Outcome(checked=len(blocks), refusal=_bound_message(part.path, beta, reason))
        dropped += [Dropped(p.path, "prefix_binding_mismatch") for _, p, _ in present[n:]]
        break
    lost = {d.path for d in dropped}
    kept = {p.signature for _, p, _ in issued if p.path not in lost}
    return Outcome(
        checked=len(blocks),
        dropped=tuple(dropped),
        predecessor=present[-1][1].signature if present else None,
        rethink=_rethink(ledger, parts, kept) if thinking_on else None,
    )


def _bound_message(path: str, beta: bool, reason: str) -> str:
    message = (
        f"{path}: Invalid `signature` in `thinking` block. The block is bound to a different "
        "conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior`"
        ' to "drop_block".'
    )
    if not beta:
        message += (
            f" That setting requires the `{BINDING_BETA}` value in the `anthropic-beta` header."
        )
    return f"{message} {reason}"


def _prefix_reason(
    recorded: tuple[PrefixPart, ...],
    current: tuple[PrefixPart, ...],
    path: str,
    carried: Carried | None,
) -> str | None:
    """The sentence naming where ``current`` first differs from ``recorded``, if it does."""
    if carried is not None:
        recorded = _rebased(recorded, carried)
    for i in range(max(len(recorded), len(current))):
        old = recorded[i] if i < len(recorded) else None
        new = current[i] if i < len(current) else None
        if old is not None and new is not None and old.digest == new.digest:
            continue
        sections = {p.section for p in (old, new) if p is not None}
        if "tools" in sections:
            return "The `tools` list differs from when the block was created."
        if "system" in sections:
            return "The `system` prompt differs from when the block was created."
        where = new.path if new is not None else path
        return f"Content before this block differs from when it was created, first at `{where}`."
    return None


def _rebased(recorded: tuple[PrefixPart, ...], carried: Carried) -> tuple[PrefixPart, ...]:
    """A block produced before a compaction, in a turn kept after it: the messages the
    compaction summarized stand as the compaction block."""
    digests = [p.digest for p in recorded]
    covered = list(carried.covered)
    if carried.part.digest in digests or digests[: len(covered)] != covered:
        return recorded
    head = tuple(p for p in recorded[: len(covered)] if p.section != "messages")
    return (*head, carried.part, *recorded[len(covered) :])


def _rethink(ledger: ThinkingLedger, parts: Sequence[Part], kept: set[str]) -> dict[str, int]:
    """The lost blocks of the replies the request holds, not yet re-created."""
    turns: dict[int, list[bytes]] = {}
    for part in parts:
        if part.role == "assistant" and part.message is not None and not part.is_thinking:
            turns.setdefault(part.message, []).append(part.digest)
    lost: dict[str, int] = {}
    for digests in turns.values():
        signature = ledger.reply_block(reply_digest(digests))
        if signature is None or signature in kept or ledger.charged(signature):
            continue
        record = ledger.get(signature)
        if record is not None:
            lost[signature] = record.tokens
    return lost


_FILLER = "I weigh what the request asks, what the tools returned and what to do next. "


def default_thinking(model: str, tokens: int) -> str:
    """Deterministic reasoning text of about ``tokens`` tokens."""
    unit = max(1, count_text(model, _FILLER))
    return (_FILLER * max(1, round(tokens / unit))).strip()
