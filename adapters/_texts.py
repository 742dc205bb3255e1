"""What the CLI engines tell the agent they drive, in the same words for every engine."""

from __future__ import annotations

from datetime import datetime

from condensate.events import AskOpened, SystemLine

CONTINUE = (
    "Continue the task from where the conversation above leaves off. Your earlier context was "
    "replaced by this window; reread any file you need before relying on it."
)
ASK = (
    "Condensate asks you to compact your context now (it is at {used} of your {line}-token "
    "line): call the compact_context tool with a summary of what matters so far (the task, "
    "decisions, files, failed attempts and what is left), or compact_microcompact to clear "
    "old tool results. If nobody answers by {deadline}, Condensate writes the summary itself."
)
"""Told to a head once per ask, in the next user input the engine sends."""
RESUMED = (
    "The {cli} process restarted in the middle of this turn (it exited unexpectedly); "
    "continue the task from where you left off. A tool call that was running may have run in "
    "part: check its effect before relying on it."
)


def ask_note(ask: AskOpened) -> str:
    return ASK.format(used=ask.used, line=ask.line, deadline=ask.deadline.strftime("%H:%M:%S UTC"))


def resumed(cli: str) -> str:
    return RESUMED.format(cli=cli)


AUTH_STATUSES = frozenset({401, 403})
"""A provider's answer to a missing or wrong credential: retrying it cannot help."""
BAD_CREDENTIAL = (
    "the provider refused {cli}'s credential (HTTP {status}{error}); set a valid key in "
    "{setting} and send the message again"
)


def bad_credential(cli: str, status: int, error: str, setting: str) -> str:
    """Why a CLI turn failed on an authentication error, naming the setting to fix."""
    return BAD_CREDENTIAL.format(
        cli=cli, status=status, error=f" {error}" if error else "", setting=setting
    )


RETRIES_TOLD = 3
"""After this many retries a CLI makes on its own in one turn (a provider answering 529 or
500), the operator is told once: the CLI may go on retrying for minutes, and until then the
log holds only its retry notices."""


def retrying(cli: str, retries: int, detail: str, at: datetime) -> SystemLine | None:
    """The system line for a CLI's ``retries``-th retry of this turn, when it is time to tell."""
    if retries != RETRIES_TOLD:
        return None
    text = (
        f"{cli} has retried its provider {retries} times in this turn (the last: {detail}); "
        "it goes on retrying on its own, and the turn runs until the provider answers or the "
        "CLI gives up (condensate stop ends it now)."
    )
    return SystemLine(at=at, code="provider-retrying", text=text)
