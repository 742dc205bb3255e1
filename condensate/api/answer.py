"""What every answer of the API is built from, the error any route may give, and the probes'
answers (``/health``, ``/ready``).

An ``Answer`` is a closed pydantic model: the server builds each answer through one (so the
OpenAPI document, made from the same models, cannot drift from what is sent), and the client
reads each answer back into it. Pure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, PlainSerializer, WithJsonSchema


class Answer(BaseModel):
    """An answer of the API: every field always sent, no other key; camelCase keys are
    aliases (``over_line`` is sent as ``overLine``)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True
    )

    def dump(self) -> dict[str, Any]:
        """The answer as the API sends it: JSON values, under their aliases."""
        return self.model_dump(mode="json", by_alias=True)


def _iso(moment: datetime) -> str:
    return moment.isoformat()


Moment = Annotated[
    AwareDatetime,
    PlainSerializer(_iso, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A time with its zone, sent as Python's ``isoformat`` writes it (``+00:00``, not ``Z``)."""


class Error(Answer):
    """Every error, whatever failed: a stable code and one sentence naming the problem."""

    error: str
    """The code, e.g. ``unknown-thread``, ``invalid-body``."""
    detail: str


class Health(Answer):
    ok: Literal[True]
    version: str


class Ready(Answer):
    """The daemon serves its threads: the log is open and every thread in it recovered."""

    ready: Literal[True]
    version: str
