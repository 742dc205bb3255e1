"""A fake model server for tests and benchmarks: the Anthropic Messages, OpenAI Responses and
Chat Completions APIs on loopback, with scripted replies, token counting, context-window
refusals in the real shapes, scripted faults (a broken stream, a stall, a stream without its
start or end, arguments cut off or not JSON, an HTML page, JSON of any shape), a request log and
an HTTP control API. Run it from a shell with ``python -m condensate.testing.fake_model --port N``.

It keeps the vendors' documented rules a context manager must respect:

- Anthropic prompt caching (``_caching``): only ``cache_control`` breakpoints (or a top-level
  ``cache_control``) write, at most 4, looked up 20 blocks back, 5-minute or 1-hour entries,
  a minimum cacheable length per model.
- OpenAI prompt caching (``_caching``): automatic from 1,024 tokens, per model and
  ``prompt_cache_key``; ``cache_write_tokens`` from GPT-5.6 on.
- Preserved thinking (``_thinking``): on the models that run the check, every reply with
  thinking on carries a signed block; a later request's blocks must keep their prefix and
  their order, else a 400 (or, with ``drop_block``, the blocks are dropped); a block the model
  cannot read is dropped silently; lost thinking is re-created at an output cost.
- Reasoning items on the Responses API (``_reasoning``): from GPT-5.6 on, one sent back after a
  change to what came before it is dropped silently and re-created at an output cost.
- Context editing and on-demand compaction (``_context``). Threshold compaction
  (``compact_20260112``) is out of scope: a request asking for it is refused with a 400 that
  says the fake does not implement it.

Cache lifetimes run on the fake's clock: ``time.monotonic()`` plus an offset that
``FakeModelServer.advance(seconds)`` or ``POST /_fake/clock {"advance": seconds}`` moves forward.
"""

from condensate.testing.fake_model._accounting import DEFAULT_WINDOW, Bill
from condensate.testing.fake_model._models import DEFAULT_MODELS, REAL_WINDOWS
from condensate.testing.fake_model._script import (
    Broken,
    Call,
    Cut,
    Fail,
    Html,
    Overflow,
    Raw,
    Reply,
    Slow,
    Stall,
    Text,
    ToolCalls,
    Unframed,
    Usage,
    reply_from_json,
    reply_to_json,
)
from condensate.testing.fake_model._server import FakeModelServer
from condensate.testing.fake_model._state import RecordedRequest, ThinkingOutcome

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_WINDOW",
    "REAL_WINDOWS",
    "Bill",
    "Broken",
    "Call",
    "Cut",
    "Fail",
    "FakeModelServer",
    "Html",
    "Overflow",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Slow",
    "Stall",
    "Text",
    "ThinkingOutcome",
    "ToolCalls",
    "Unframed",
    "Usage",
    "reply_from_json",
    "reply_to_json",
]
