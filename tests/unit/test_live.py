"""The live channel's hub (``condensate.runtime.live``): who gets what is published, a subscriber
that falls behind is dropped as lagged without slowing anybody, a closed hub ends every
subscription; and the server-sent event framing of the live routes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import anyio

from condensate.events import Stored, SystemLine
from condensate.http.live_routes import frame
from condensate.runtime.live import GONE, STATUS, Hub, Item, Subscription, event_json

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def stored(thread: str, seq: int) -> Stored:
    return Stored(thread, seq, SystemLine(at=AT, code="note", text=f"line {seq}"), tokens=3)


async def drained(subscription: Subscription) -> list[Item]:
    """Every item queued, until the queue is empty for a moment."""
    items: list[Item] = []
    while (item := await subscription.receive(0.01)) is not None:
        items.append(item)
    return items


async def test_items_reach_their_threads_and_every_thread_subscribers() -> None:
    """A logged event goes to its thread's subscribers and to every thread's, as the tail gives
    it (seq, tokens, the event), not to another thread's."""
    hub = Hub()
    with hub.subscribe("t-a") as mine, hub.subscribe("t-b") as other, hub.subscribe() as every:
        hub.publish_logged([stored("t-a", 1), stored("t-a", 2)])
        hub.status("t-b", "running")
        assert [i.seq for i in await drained(mine)] == [1, 2]
        assert [(i.kind, i.data) for i in await drained(other)] == [(STATUS, {"status": "running"})]
        assert [(i.thread, i.seq) for i in await drained(every)] == [
            ("t-a", 1),
            ("t-a", 2),
            ("t-b", None),
        ]


def test_a_logged_item_is_the_tails_shape() -> None:
    """A logged event's data is ``{"seq", "tokens", ...the event}``, its kind the event's."""
    assert event_json(stored("t-a", 7)) == {
        "seq": 7,
        "tokens": 3,
        "v": 1,
        "at": "2026-01-02T03:04:05Z",
        "kind": "system.line",
        "code": "note",
        "text": "line 7",
    }


async def test_a_subscriber_that_falls_behind_is_dropped_as_lagged() -> None:
    """Past its queue a subscriber is marked lagged and ended (what was queued is still read,
    then the end); publishing never waits, and a reader that keeps up is untouched."""
    hub = Hub(capacity=4)
    with hub.subscribe("t-a") as slow, hub.subscribe("t-a") as quick:
        for seq in range(1, 11):
            hub.publish_logged([stored("t-a", seq)])
            assert (await quick.receive(1)) is not None
        assert slow.lagged
        assert not quick.lagged
        assert [i.seq for i in await drained_until_end(slow)] == [1, 2, 3, 4]


async def drained_until_end(subscription: Subscription) -> list[Item]:
    """Every item queued, then the subscription's end (which must come)."""
    items: list[Item] = []
    while True:
        try:
            item = await subscription.receive(1)
        except anyio.EndOfStream:
            return items
        assert item is not None, "the subscription did not end"
        items.append(item)


async def test_closing_the_hub_ends_every_subscription() -> None:
    """The daemon stops: a subscriber reads what was queued, then the end; a subscription
    made after that ends at once; nothing is listening once the blocks are left."""
    hub = Hub()
    with hub.subscribe("t-a") as one:
        hub.gone("t-a")
        hub.close()
        assert [i.kind for i in await drained_until_end(one)] == [GONE]
        assert not one.lagged
        with hub.subscribe() as late:
            assert await drained_until_end(late) == []
    assert not hub.listening("t-a")


async def test_a_quiet_subscription_times_out_with_none() -> None:
    """No item within the wait: None, and the subscription stays open."""
    hub = Hub()
    with hub.subscribe("t-a") as quiet:
        assert await quiet.receive(0.01) is None
        hub.ephemeral("t-a", "message.delta", {"text": "Hel"})
        item = await quiet.receive(1)
    assert item == Item("t-a", "message.delta", {"text": "Hel"})


def test_nothing_is_built_for_a_thread_nobody_follows() -> None:
    """Without a subscriber for it (or for every thread) a thread is not listened to."""
    hub = Hub()
    with hub.subscribe("t-a"):
        assert hub.listening("t-a")
        assert not hub.listening("t-b")
    with hub.subscribe():
        assert hub.listening("t-b")


def test_a_frame_is_one_server_sent_event() -> None:
    """A logged event's frame carries its seq as the id; an ephemeral item's has no id; the
    data is one line of JSON, a newline in a text escaped."""
    assert frame("message.user", {"seq": 3, "text": "a\nb"}, 3) == (
        b'id: 3\nevent: message.user\ndata: {"seq":3,"text":"a\\nb"}\n\n'
    )
    text = frame(STATUS, {"status": "idle"}).decode()
    assert text == 'event: thread.status\ndata: {"status":"idle"}\n\n'
    assert json.loads(text.split("data: ")[1]) == {"status": "idle"}
