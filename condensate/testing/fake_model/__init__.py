"""A fake model server for tests and benchmarks: the Anthropic Messages, OpenAI Responses and
Chat Completions APIs on loopback, with scripted replies, token counting, a simulated prompt
cache, context-window refusals in the real shapes, scripted faults (a broken stream, a stall,
a stream without its start or end, arguments cut off or not JSON, an HTML page, JSON of any
shape), a request log and an HTTP control API.
Run it from a shell with ``python -m condensate.testing.fake_model --port N``.
"""

from condensate.testing.fake_model._accounting import DEFAULT_WINDOW, Bill
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
from condensate.testing.fake_model._state import DEFAULT_MODELS, RecordedRequest

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_WINDOW",
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
    "ToolCalls",
    "Unframed",
    "Usage",
    "reply_from_json",
    "reply_to_json",
]
