"""The crash test's child: appends tagged batches to an event log until it is killed.

Usage: python _store_writer.py DB RUN BATCH_SIZE. For each batch it prints ``counted B`` when
the store has counted the batch's last event (just before the write transaction begins) and
``committed B`` once ``append`` has returned.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from condensate.events import UserMessage
from condensate.eventlog.sqlite_sync import EventLog

THREAD = "crash"
AT = datetime(2025, 1, 1, tzinfo=UTC)


class SignallingCounter:
    """Counts a byte estimate, and reports when the store has counted a whole batch."""

    name = "signalling"

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        if self.calls % self.batch_size == 0:
            _say(f"counted {self.calls // self.batch_size}")
        return len(text) // 3 + 1


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    db, run, size = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with EventLog.open(db, counter=SignallingCounter(size)) as log:
        batch = 0
        while True:
            batch += 1
            log.append(
                THREAD,
                [UserMessage(text=f"run {run} batch {batch} item {i}", at=AT) for i in range(size)],
            )
            _say(f"committed {batch}")


if __name__ == "__main__":
    main()
