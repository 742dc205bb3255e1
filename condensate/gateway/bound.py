"""A request's size bounded from its bytes alone, so that a request well under its thread's
gate is forwarded before it is parsed, and parsed and measured once its reply has gone out:
the gateway's latency then grows with what changed between two requests, not with the
conversation.

The bound stands on the session's last request the provider counted. Every token the
provider counts is at least one byte of the request (byte-level BPE; the markup around a
message or a block is fewer tokens than the JSON that carries it), so a request that shares
a prefix and a suffix with that one holds at most its count plus the bytes in between, plus
a few tokens where the new bytes meet the old. What the provider counts otherwise than by its
bytes (an image, a document, a file or an image named by id or URL) is never bounded so: a
request that adds one is parsed and measured before it goes on, as is one whose model is not
its first key (the model picks the tokenizer and the session's meter).
"""

from __future__ import annotations

import re

SLACK = 256
"""Tokens added to the bound for where the changed bytes meet the unchanged ones."""
BLOCK = 1 << 16
"""Bytes compared at once while looking for where two requests part."""
OPAQUE = (
    b'"image"',
    b'"document"',
    b'"file_id"',
    b'"file_url"',
    b'"image_url"',
    b'"input_image"',
    b'"input_file"',
    b'"container_upload"',
)
"""Markers of content whose tokens are not bounded by its bytes (Anthropic's image and
document blocks, the Responses API's image and file inputs, files named by id or URL)."""
_LEADING_MODEL = re.compile(rb'\{\s*"model"\s*:\s*"([A-Za-z0-9._:/@-]{1,200})"')


def leading_model(body: bytes) -> str | None:
    """The request's model, when it is the body's first key (Claude Code and Codex both
    send it so), read without parsing the body."""
    found = _LEADING_MODEL.match(body)
    return found.group(1).decode("ascii") if found else None


def shared_prefix(old: bytes, new: bytes) -> int:
    """How many leading bytes ``new`` shares with ``old``."""
    limit = min(len(old), len(new))
    view = memoryview(old)
    start = 0
    while start < limit:
        end = min(start + BLOCK, limit)
        if new.startswith(view[start:end], start):
            start = end
            continue
        # old[:start] == new[:start], and they part before ``end``.
        low, high = start, end
        while high - low > 1:
            middle = (low + high) // 2
            if new.startswith(view[low:middle], low):
                low = middle
            else:
                high = middle
        return low
    return limit


def shared_suffix(old: bytes, new: bytes, most: int) -> int:
    """How many trailing bytes (at most ``most``) ``new`` shares with ``old``."""
    view = memoryview(old)
    ends_old, ends_new = len(old), len(new)
    done = 0
    while done < most:
        step = min(BLOCK, most - done)
        if new.endswith(view[ends_old - done - step : ends_old - done], 0, ends_new - done):
            done += step
            continue
        low, high = done, done + step
        while high - low > 1:
            middle = (low + high) // 2
            if new.endswith(view[ends_old - middle : ends_old - low], 0, ends_new - low):
                low = middle
            else:
                high = middle
        return low
    return most


def changed(old: bytes, new: bytes) -> tuple[int, int]:
    """The span ``new[start:end]`` that is not in the prefix and suffix it shares with
    ``old``."""
    start = shared_prefix(old, new)
    end = len(new) - shared_suffix(old, new, min(len(old), len(new)) - start)
    return start, end


def bound(prior: bytes, count: int, body: bytes) -> int | None:
    """At most how many tokens the provider counts for ``body``, given that it counted
    ``count`` for ``prior``; None when the bytes cannot say (opaque content changed)."""
    start, end = changed(prior, body)
    if any(body.find(marker, start, end) != -1 for marker in OPAQUE):
        return None
    return count + (end - start) + SLACK
