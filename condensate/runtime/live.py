"""The daemon's live channel: a publish/subscribe hub, one per runtime.

``Runtime.append`` publishes every event it stores (in the shape ``GET /threads/:id/tail``
gives an event) to the subscribers of that thread and to those of every thread; ephemeral
items that are never logged (a turn's status, text chunks as a model streams them) travel the
same way with a ``kind`` of their own and no ``seq``. A subscriber reads from a bounded queue:
publishing never waits, and a subscriber that falls a queue behind is dropped and marked
``lagged`` (its reader tells its client to resync), so a slow reader never slows a thread.
No task is started here: a subscription lives in the ``with`` block of whoever reads it, and
``close`` ends every one when the daemon stops.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from condensate.events import Stored

QUEUE_ITEMS = 1_024
"""Items a subscriber may fall behind by before it is dropped as lagged."""

STATUS = "thread.status"
"""An ephemeral item: a thread's status changed (``{"status": "running"|"waiting-for-approval"
|"idle"}``): its turn started or ended, or the turn began or stopped waiting on an approval."""
DELTA = "message.delta"
"""An ephemeral item: a chunk of a reply as the model writes it (``{"text": ...}``); the
whole message is logged once it is done."""
GONE = "thread.gone"
"""An ephemeral item: the thread left this daemon (archived, or taken by another daemon of a
fleet); nothing more comes for it here."""


@dataclass(frozen=True)
class Item:
    """One thing the channel carries for a thread: a logged event (``seq`` its place in the
    log, ``data`` the event as the tail gives it) or an ephemeral item (``seq`` None)."""

    thread: str
    kind: str
    data: Mapping[str, Any]
    seq: int | None = None


def event_json(stored: Stored) -> dict[str, Any]:
    """A logged event as the API gives it: its seq and token count, then the event."""
    return {"seq": stored.seq, "tokens": stored.tokens, **stored.event.model_dump(mode="json")}


def logged(stored: Stored) -> Item:
    return Item(stored.thread_id, stored.event.kind, event_json(stored), stored.seq)


class Subscription:
    """One reader's queue: items of one thread (``thread``), or of every thread (None)."""

    def __init__(self, thread: str | None, capacity: int) -> None:
        self.thread = thread
        self.lagged = False
        """It fell ``capacity`` items behind and was dropped: what it missed is lost."""
        self._send: MemoryObjectSendStream[Item]
        self._receive: MemoryObjectReceiveStream[Item]
        self._send, self._receive = anyio.create_memory_object_stream[Item](capacity)

    def offer(self, item: Item) -> None:
        """Queue ``item`` without waiting; a full queue ends the subscription as lagged."""
        try:
            self._send.send_nowait(item)
        except anyio.WouldBlock:
            self.lagged = True
            self._send.close()
        except anyio.ClosedResourceError:
            pass  # ended already: lagged, or the hub closed

    def end(self) -> None:
        """No more items: the reader gets those queued, then ``anyio.EndOfStream``."""
        self._send.close()

    async def receive(self, wait: float) -> Item | None:
        """The next item, or None when none came within ``wait`` seconds. Raises
        ``anyio.EndOfStream`` once the subscription ended and its queue is empty."""
        with anyio.move_on_after(wait):
            return await self._receive.receive()
        return None

    def close(self) -> None:
        self._send.close()
        self._receive.close()


class Hub:
    """The daemon's subscribers, by thread (None: every thread)."""

    def __init__(self, capacity: int = QUEUE_ITEMS) -> None:
        self.capacity = capacity
        self._subscribers: dict[str | None, set[Subscription]] = {}
        self._closed = False

    @contextmanager
    def subscribe(self, thread: str | None = None) -> Iterator[Subscription]:
        """Items of ``thread`` (None: of every thread) published while the block runs. Once
        the hub is closed a subscription ends at once."""
        subscription = Subscription(thread, self.capacity)
        if self._closed:
            subscription.end()
        else:
            self._subscribers.setdefault(thread, set()).add(subscription)
        try:
            yield subscription
        finally:
            readers = self._subscribers.get(thread)
            if readers is not None:
                readers.discard(subscription)
                if not readers:
                    del self._subscribers[thread]
            subscription.close()

    def listening(self, thread: str) -> bool:
        """Whether anybody reads ``thread``'s items (else there is nothing to build)."""
        return thread in self._subscribers or None in self._subscribers

    def publish(self, item: Item) -> None:
        """Hand ``item`` to its thread's subscribers and to every thread's; never waits."""
        for key in (item.thread, None):
            for subscription in self._subscribers.get(key, ()):
                subscription.offer(item)

    def publish_logged(self, stored: Sequence[Stored]) -> None:
        """Publish events just stored, in seq order."""
        for item in stored:
            if self.listening(item.thread_id):
                self.publish(logged(item))

    def ephemeral(self, thread: str, kind: str, data: Mapping[str, Any]) -> None:
        """Publish an item that is not logged (a turn's status, a chunk of streamed text): it
        reaches whoever listens now and is gone after. Check ``listening`` first where
        ``data`` costs something to build."""
        self.publish(Item(thread, kind, data))

    def status(self, thread: str, status: str) -> None:
        self.ephemeral(thread, STATUS, {"status": status})

    def gone(self, thread: str) -> None:
        self.ephemeral(thread, GONE, {"id": thread})

    def close(self) -> None:
        """The daemon stops: every subscription ends (its readers drain and return) and new
        ones end at once."""
        self._closed = True
        for readers in self._subscribers.values():
            for subscription in readers:
                subscription.end()
