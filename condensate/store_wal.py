"""The event log's background WAL checkpoints: a thread with its own connection.

Apart from ``store`` because it is a concurrency concern of its own: ``EventLog`` only asks
for a checkpoint after enough bytes are written, and closes the checkpointer before itself.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

from condensate.eventlog.schema import BUSY_TIMEOUT_MS


class Checkpointer:
    """Copies the WAL into the database file on its own thread and connection, so that no
    append's COMMIT waits for a checkpoint and its fsync. Started at the first request."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wake = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def request(self) -> None:
        with self._lock:
            if self._closing:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="condensate-wal-checkpoint", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def close(self) -> None:
        with self._lock:
            self._closing = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        try:
            connection = sqlite3.connect(self._path, isolation_level=None)
        except sqlite3.Error:
            return  # the writer's own checkpoints (BACKSTOP_PAGES) still bound the WAL
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closing:
                    return
                # PASSIVE never blocks a writer; what it cannot copy now, the next one will.
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            connection.close()
