"""What the fake knows about the vendors' models: the models it lists, their real windows, which
Claude models run the preserved-thinking checks and whose blocks each may read, each model's
minimum cacheable prompt, and which OpenAI models bill cache writes. Pure tables; no I/O.

Sources are the vendors' pages as digested in the project's research note (URLs beside each
table). Where a figure is the note's own assumption it says "assumed".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DEFAULT_MODELS = (
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
    "claude-fable-5-2",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "gpt-5.5",
    "gpt-5.6-sol",
    "gpt-6.2-sol",
    "gpt-5-mini",
)
"""What ``GET /v1/models`` lists by default: today's models and the older ones tests use."""

REAL_WINDOWS: dict[str, int] = {
    "claude-opus-5-5": 1_000_000,
    "claude-sonnet-5-5": 1_000_000,
    "claude-haiku-5-5": 1_000_000,
    "claude-fable-5-2": 1_000_000,
    "claude-mythos-5-2": 1_000_000,
    "claude-fable-5-1": 1_000_000,
    "claude-mythos-5-1": 1_000_000,
    "claude-opus-5": 1_000_000,
    "claude-sonnet-5": 1_000_000,
    "claude-fable-5": 1_000_000,
    "claude-mythos-5": 1_000_000,
    "claude-opus-4-8": 1_000_000,
    "claude-opus-4-7": 1_000_000,
    "claude-opus-4-6": 1_000_000,
    "claude-opus-4-5": 200_000,
    "claude-haiku-4-5": 200_000,
    "gpt-5.5": 1_050_000,
    "gpt-5.6-sol": 1_050_000,
    "gpt-5.6-terra": 1_050_000,
    "gpt-5.6-luna": 1_050_000,
    "gpt-6-sol": 1_050_000,
    "gpt-6-astra": 1_050_000,
    "gpt-6-luna": 1_050_000,
    "gpt-6.1-sol": 1_050_000,
    "gpt-6.2-sol": 1_050_000,
    "gpt-6.2-astra": 1_050_000,
}
"""The models' real context windows at the API (platform.claude.com/docs/en/about-claude/models/
overview, developers.openai.com/api/docs/models; Opus 4.5-4.8, gpt-5.5 and gpt-6-luna are
secondary figures). The fake's default window stays ``DEFAULT_WINDOW``; pass
``windows=REAL_WINDOWS`` for these."""

CHECK_MODELS = (
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
)
"""The models that run the preserved-thinking prefix check (``supportedModels`` of
https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks.md)."""

_NEWER = frozenset(
    {
        *CHECK_MODELS,
        "claude-opus-5",
        "claude-sonnet-5",
        "claude-fable-5",
        "claude-mythos-5",
    }
)
_OLDER = "older"
"""Stands for every model before the Claude 5 generation in the table below."""
_ANY = "any"

_FABLE_5_1_READS = frozenset(
    {
        "claude-fable-5-1",
        "claude-mythos-5-1",
        "claude-opus-5-5",
        "claude-opus-5",
        "claude-sonnet-5",
        "claude-fable-5",
        "claude-mythos-5",
        _OLDER,
    }
)
_READS: dict[str, frozenset[str]] = {
    "claude-opus-5-5": frozenset(
        {"claude-opus-5-5", "claude-opus-5", "claude-sonnet-5", "claude-sonnet-5-5", _OLDER}
    ),
    "claude-fable-5-1": _FABLE_5_1_READS,
    "claude-mythos-5-1": _FABLE_5_1_READS,
    "claude-sonnet-5-5": frozenset({"claude-sonnet-5-5", "claude-sonnet-5", _OLDER}),
    "claude-fable-5-2": frozenset({_ANY}),
    "claude-mythos-5-2": frozenset({_ANY}),
    "claude-haiku-5-5": frozenset({"claude-haiku-5-5"}),
}
"""Whose thinking blocks each checking model reads (https://platform.claude.com/docs/en/
build-with-claude/preserved-thinking, "Each model reads its own thinking blocks and those of a
fixed set of other models"). Opus 5.5 reads Opus 5 and earlier Opus, Sonnet and Haiku, and
Sonnet 5.5; Fable/Mythos 5.1 read each other, earlier models and Opus 5.5; Sonnet 5.5 reads
Sonnet 5, Opus 4.8, Haiku 4.5 and earlier; Haiku 5.5 reads only its own. Assumed: Fable and
Mythos 5.2 read every earlier model's blocks (which models Fable 5.2 reads is not found)."""

_READ_ONLY_BY: dict[str, frozenset[str]] = {
    "claude-fable-5-2": frozenset({"claude-fable-5-2", "claude-mythos-5-2"}),
    "claude-mythos-5-2": frozenset({"claude-fable-5-2", "claude-mythos-5-2"}),
}
"""Producers whose blocks only some models read: "Only Claude Fable 5.2 and Claude Mythos 5.2
read Claude Fable 5.2 thinking blocks" (https://platform.claude.com/docs/en/models/fable-5-2/
whats-new-fable-5-2)."""

MIN_CACHEABLE: dict[str, int] = {
    "claude-opus-5-5": 512,
    "claude-sonnet-5-5": 512,
    "claude-fable-5-1": 512,
    "claude-mythos-5-1": 512,
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
    "claude-fable-5-2": 512,
    "claude-mythos-5-2": 512,
    "claude-haiku-5-5": 4_096,
    "claude-opus-4-8": 1_024,
    "claude-sonnet-5": 1_024,
    "claude-sonnet-4-6": 1_024,
    "claude-sonnet-4-5": 1_024,
    "claude-opus-4-1": 1_024,
    "claude-opus-4": 1_024,
    "claude-sonnet-4": 1_024,
    "claude-opus-4-7": 2_048,
    "claude-haiku-3-5": 2_048,
    "claude-3-5-haiku": 2_048,
    "claude-opus-4-6": 4_096,
    "claude-opus-4-5": 4_096,
    "claude-haiku-4-5": 4_096,
}
"""The minimum cacheable prompt per model (https://platform.claude.com/docs/en/build-with-claude/
prompt-caching, through a capture of the page: "Shorter prompts cannot be cached, even if marked
with `cache_control`"; Opus 5.5, Sonnet 5.5, Opus 4.7 and Haiku 3.5 are secondary figures).
Assumed, not found: 512 for Fable and Mythos 5.2 (as 5.1), 4,096 for Haiku 5.5 (as Haiku 4.5)."""
DEFAULT_MIN_CACHEABLE = 1_024
"""Assumed for a model not in ``MIN_CACHEABLE``."""

_KEEPS_ALL_THINKING = frozenset(
    {
        "claude-opus-4-5",
        "claude-opus-4-6",
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-opus-5",
        "claude-opus-5-5",
        "claude-sonnet-4-6",
        "claude-sonnet-5",
        "claude-sonnet-5-5",
        "claude-fable-5",
        "claude-fable-5-1",
        "claude-fable-5-2",
        "claude-mythos-5",
        "claude-mythos-5-1",
        "claude-mythos-5-2",
    }
)
"""Models whose ``clear_thinking_20251015`` keeps every turn by default ("Opus 4.5+ and Sonnet
4.6+: all turns. Fable and Mythos models: all turns. Earlier Opus/Sonnet and all Haiku: last
turn only", https://platform.claude.com/docs/en/build-with-claude/context-editing)."""

_KNOWN = frozenset({*MIN_CACHEABLE, *_NEWER, *_KEEPS_ALL_THINKING})


def canonical(model: str, known: Iterable[str] = _KNOWN) -> str:
    """The known model a name stands for (``claude-opus-5-5-20260901`` is ``claude-opus-5-5``):
    the longest known name it equals or starts with followed by ``-``; else the name itself."""
    matches = [k for k in known if model == k or model.startswith(k + "-")]
    return max(matches, key=len) if matches else model


def runs_thinking_check(model: str) -> bool:
    return canonical(model) in CHECK_MODELS


def can_read(reader: str, producer: str) -> bool:
    """Whether ``reader`` reads thinking blocks ``producer`` wrote. Models that run no check
    read every block (the fake's old behaviour). Haiku 5.5's blocks "are not locked to the model
    that produced them and replay unchanged on other models" (docs.aws.amazon.com/bedrock/latest/
    userguide/claude-messages-thinking-block-binding.html; the Claude API page is not found)."""
    reader, producer = canonical(reader), canonical(producer)
    if reader not in CHECK_MODELS or reader == producer:
        return True
    only = _READ_ONLY_BY.get(producer)
    if only is not None:
        return reader in only
    if producer == "claude-haiku-5-5":
        return True
    reads = _READS[reader]
    return _ANY in reads or producer in reads or (producer not in _NEWER and _OLDER in reads)


def min_cacheable(model: str) -> int:
    return MIN_CACHEABLE.get(canonical(model), DEFAULT_MIN_CACHEABLE)


def keeps_all_thinking(model: str) -> bool:
    return canonical(model) in _KEEPS_ALL_THINKING


_GPT_VERSION = re.compile(r"gpt-(\d+)(?:\.(\d+))?(?:-|$)")


def _gpt_5_6_or_later(model: str) -> bool:
    match = _GPT_VERSION.match(model)
    if match is None:
        return False
    return (int(match.group(1)), int(match.group(2) or 0)) >= (5, 6)


def bills_cache_writes(model: str) -> bool:
    """Whether an OpenAI model is of the GPT-5.6 family or later: "For GPT-5.6 models and later
    model families, cache writes cost 1.25x the uncached input token rate"
    (https://developers.openai.com/api/docs/guides/prompt-caching)."""
    return _gpt_5_6_or_later(model)


def drops_stale_reasoning(model: str) -> bool:
    """Whether an OpenAI model drops reasoning items that follow a prefix change: "Starting
    with newer frontier models, the API will drop reasoning items that follow a prefix change"
    (https://developers.openai.com/api/docs/guides/keep-prefix-unchanged.md). Which models
    those are is not documented: assumed, the GPT-5.6 family and later."""
    return _gpt_5_6_or_later(model)
