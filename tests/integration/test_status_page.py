"""The status page in a real browser: Debian's Chromium, headless, driven by Playwright, on a
real ``condensate serve`` with the fake model server. The page loads under its strict
Content-Security-Policy with the token from its fragment, lists a running thread with its
usage bar, and the buttons it shows answer a head's ask and a tool call's approval through
the API: the thread's log records the operator's answer. A screenshot of the page is saved in
the test's temporary directory (CI keeps it) and its path printed.

An ask needs a head on an engine whose heads are asked (the CLI engines'): the test engine
``echo-asks`` (``tests/engines/echo.py``), plugged in by an entry point, is one, with no CLI;
its model's window is set small, so that a short brief and its echo pass the head's line.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright, expect

from condensate.core.tokens import counter_for
from condensate.testing.fake_model import Call, FakeModelServer, Stall, Text, ToolCalls
from tests.integration.daemon import DaemonProcess, call, running_daemon, wait_for
from tests.integration.test_cli import condensate

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RUNNING_MODEL = "anthropic:claude-sonnet-4-5"
APPROVING_MODEL = "anthropic:claude-haiku-4-5"
ASKING_MODEL = "anthropic:claude-opus-4-5"
ASKING_WINDOW = 20_000
"""The asking head's line is this less the reserves (8,192 + 8,192): 3,616 tokens."""


def asking_site(root: Path) -> Path:
    """A directory holding only an installed distribution's metadata: its entry point names
    the echo engine whose heads are asked."""
    meta = root / "site" / "echo_asks-0.1.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-asks\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(
        "[condensate.engines]\necho-asks = tests.engines.echo:ASKING\n"
    )
    return root / "site"


@pytest.fixture(scope="module")
def daemon(
    fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    """A daemon that runs the native loop and ``echo-asks``."""
    root = tmp_path_factory.mktemp("status-page")
    home = root / "home"
    home.mkdir(mode=0o700)
    site = asking_site(root)
    paths = [str(site), str(Path(__file__).resolve().parents[2])]
    with running_daemon(
        home,
        fake.url,
        PYTHONPATH=":".join(paths),
        CONDENSATE_MODEL_WINDOWS=f'{{"{ASKING_MODEL}": {ASKING_WINDOW}}}',
    ) as process:
        yield process


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless; the test fails (never skips) without it."""
    assert await anyio.Path(CHROMIUM).exists(), (
        f"{CHROMIUM} is missing: install Debian's chromium (as root: apt-get install -y "
        "chromium; scripts/setup does)"
    )
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            await launched.close()


class Console:
    """What the page said on its console and what it threw: a CSP violation shows here."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self.message)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def message(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"{message.type}: {message.text} ({message.location['url']})")


async def new_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, cwd: Path, **body: Any
) -> dict[str, Any]:
    status, thread = await call(session, daemon, "POST", "/threads", {"cwd": str(cwd), **body})
    assert status == 201, thread
    return dict(thread)


async def a_running_thread(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, cwd: Path
) -> dict[str, Any]:
    """A native thread whose model call stalls: it stays running through the test."""
    fake.queue(Stall(Text("Late."), seconds=120), model=RUNNING_MODEL.partition(":")[2])
    thread = await new_thread(
        session, daemon, cwd, model=RUNNING_MODEL, brief="Work on the parser for a while."
    )
    await wait_for(session, daemon, thread["id"], lambda e: e["kind"] == "turn.started")
    status, shown = await call(session, daemon, "GET", f"/threads/{thread['id']}")
    assert (status, shown["status"]) == (200, "running"), shown
    return dict(shown)


async def a_head_asked_to_compact(
    session: aiohttp.ClientSession, daemon: DaemonProcess, cwd: Path
) -> dict[str, Any]:
    """An ``echo-asks`` head past its line with an ask open: its brief (about 2,500 tokens)
    fits the line, the brief and its echo do not, so the next turn's checkpoint asks."""
    brief = " ".join(f"Remember item {i} of the inventory." for i in range(300))
    assert 2_000 < counter_for(ASKING_MODEL).count(brief) < 3_400
    thread = await new_thread(
        session, daemon, cwd, engine="echo-asks", model=ASKING_MODEL, brief=brief, head=True
    )
    await wait_for(session, daemon, thread["id"], lambda e: e["kind"] == "turn.ended")
    status, sent = await call(
        session, daemon, "POST", f"/threads/{thread['id']}/messages", {"text": "Go on."}
    )
    assert status == 202, sent
    await wait_for(session, daemon, thread["id"], lambda e: e["kind"] == "ask.opened")
    status, shown = await call(session, daemon, "GET", f"/threads/{thread['id']}")
    assert status == 200
    assert shown["pendingAsk"] is not None, shown
    return dict(shown)


async def opened(browser: Browser, daemon: DaemonProcess) -> tuple[Page, Console]:
    """The page, opened as ``condensate ui`` prints it, once its live stream is up."""
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    console = Console(page)
    await page.goto(f"{daemon.url}/ui#token={daemon.token}")
    await expect(page.locator("#connection")).to_have_text("Live")
    return page, console


async def test_the_page_shows_a_running_thread_and_answers_its_ask(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    fake: FakeModelServer,
    browser: Browser,
    tmp_path: Path,
) -> None:
    """The page lists the running thread as running, its usage bar at its usage against its
    line; it shows the head's pending ask, and its Decline button answers it: the head's log
    records the answer by the operator, and the page shows the ask gone."""
    running = await a_running_thread(session, daemon, fake, tmp_path)
    head = await a_head_asked_to_compact(session, daemon, tmp_path)
    ask = head["pendingAsk"]["ask_id"]
    page, console = await opened(browser, daemon)
    assert "token" not in page.url, "the token is left in the address bar"

    row = page.locator(f'tr[data-thread="{running["id"]}"]')
    await expect(row).to_contain_text("running")
    bar = row.get_by_role("meter", name=f"Usage of {running['id']}")
    await expect(bar).to_have_attribute("aria-valuenow", str(running["usage"]["used"]))
    await expect(bar).to_have_attribute("aria-valuemax", str(running["line"]))
    await expect(row).to_contain_text(f"ceiling {running['ceiling']:,}")

    await page.get_by_role("button", name=head["id"], exact=True).click()
    await expect(page.locator("#ask")).to_contain_text(f"Ask {ask}")
    shot = tmp_path / "status-page.png"
    await page.screenshot(path=str(shot), full_page=True)
    print(f"status page screenshot: {shot}")  # noqa: T201 - CI's output names the artifact
    assert shot.stat().st_size > 10_000

    await page.get_by_role("button", name="Decline").click()
    await expect(page.locator("#answer-status")).to_contain_text(f"Answered {ask}")
    events = await wait_for(session, daemon, head["id"], lambda e: e["kind"] == "ask.answered")
    answered = [e for e in events if e["kind"] == "ask.answered"]
    assert [(e["ask_id"], e["mode"], e["by"]) for e in answered] == [(ask, "decline", "operator")]
    await expect(page.locator("#ask")).to_have_text("None.")
    await expect(page.locator(f'tr[data-thread="{head["id"]}"]')).not_to_contain_text("ask pending")
    assert console.errors == []


async def test_an_approval_answered_from_the_page_reaches_the_thread(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    fake: FakeModelServer,
    browser: Browser,
    tmp_path: Path,
) -> None:
    """A native thread under ``permissions: "ask"`` waits on a shell call; the page lists it
    as waiting-for-approval and shows the call with its command, its Allow button answers
    it, and the call runs: the log records the operator's allow and the command's effect is
    there, and the thread no longer waits."""
    model = APPROVING_MODEL.partition(":")[2]
    made = f"made-{uuid.uuid4().hex[:6]}.txt"
    fake.queue(ToolCalls([Call("shell", {"command": f"touch {made}"})]), Text("Made."), model=model)
    thread = await new_thread(
        session, daemon, tmp_path, model=APPROVING_MODEL, brief="Make the file.", permissions="ask"
    )
    await wait_for(session, daemon, thread["id"], lambda e: e["kind"] == "approval.requested")
    page, console = await opened(browser, daemon)

    row = page.locator(f'tr[data-thread="{thread["id"]}"]')
    await expect(row).to_contain_text("waiting-for-approval")
    await page.get_by_role("button", name=thread["id"], exact=True).click()
    pending = page.locator("#approvals")
    await expect(pending).to_contain_text(f"shell: touch {made}")
    await pending.get_by_role("button", name="Allow").click()
    events = await wait_for(session, daemon, thread["id"], lambda e: e["kind"] == "turn.ended")
    answers = [(e["decision"], e["by"]) for e in events if e["kind"] == "approval.answered"]
    assert answers == [("allow", "operator")]
    assert (tmp_path / made).exists()
    await expect(pending).to_have_text("None.")
    await expect(row).not_to_contain_text("waiting-for-approval")
    assert console.errors == []


async def test_a_window_joins_the_selected_threads_timeline_as_it_is_logged(
    session: aiohttp.ClientSession,
    daemon: DaemonProcess,
    fake: FakeModelServer,
    browser: Browser,
    tmp_path: Path,
) -> None:
    """With a thread selected, a window taken while the page is open (a queued microcompact,
    carried out at the next turn) appears on its timeline with its kind and author."""
    model = APPROVING_MODEL.partition(":")[2]
    fake.queue(Text("Done."), model=model)
    thread = await new_thread(session, daemon, tmp_path, model=APPROVING_MODEL, brief="Start.")
    await wait_for(session, daemon, thread["id"], lambda e: e["kind"] == "turn.ended")
    page, console = await opened(browser, daemon)
    await page.get_by_role("button", name=thread["id"], exact=True).click()
    await expect(page.locator("#no-windows")).to_be_visible()

    path = f"/threads/{thread['id']}/compact"
    status, queued = await call(session, daemon, "POST", path, {"mode": "microcompact"})
    assert status == 202, queued
    fake.queue(Text("Carried on."), model=model)
    path = f"/threads/{thread['id']}/messages"
    status, sent = await call(session, daemon, "POST", path, {"text": "Carry on."})
    assert status == 202, sent
    events = await wait_for(session, daemon, thread["id"], lambda e: e["kind"] == "window")
    window = next(e for e in events if e["kind"] == "window")
    timeline = page.locator("#windows li")
    await expect(timeline).to_have_count(1)
    assert (window["window_kind"], window["request"]) == ("microcompact", queued["seq"])
    await expect(timeline).to_contain_text(
        f"microcompact by the planner, as requested at seq {queued['seq']}"
    )
    await expect(timeline).to_contain_text(f"seq {window['seq']}")
    await expect(page.locator("#no-windows")).to_be_hidden()
    await page.screenshot(path=str(tmp_path / "status-page-windows.png"), full_page=True)
    assert console.errors == []


async def test_the_page_is_served_without_a_token_under_a_strict_policy(
    session: aiohttp.ClientSession, daemon: DaemonProcess
) -> None:
    """``/ui``, its script and its style need no token (they hold no secret) and carry a
    Content-Security-Policy that allows this daemon's own script, style and API only, and
    ``nosniff``; the page itself has no inline script or style."""
    policy = ""
    for path, kind in (("/ui", "text/html"), ("/ui/app.js", "text/javascript")):
        async with session.get(daemon.url + path) as response:
            assert response.status == 200
            assert response.content_type == kind
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            policy = response.headers["Content-Security-Policy"]
            text = await response.text()
        assert daemon.token not in text
    assert "default-src 'self'" in policy
    assert "'unsafe-inline'" not in policy
    assert "frame-ancestors 'none'" in policy
    async with session.get(daemon.url + "/ui") as response:
        page = await response.text()
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/ui/app.js" defer>']
    assert "<style" not in page
    assert " style=" not in page
    async with session.get(daemon.url + "/ui/style.css") as response:
        assert response.status == 200
        assert response.content_type == "text/css"


async def test_condensate_ui_prints_the_pages_address_with_the_token(
    session: aiohttp.ClientSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    """``condensate ui`` prints the page's address on the running daemon, the token in its
    fragment; ``--open`` hands that address to the browser ($BROWSER here)."""
    code, out, err = await condensate(daemon.home, "ui", "--json")
    assert code == 0, err
    url = json.loads(out)["url"]
    assert url == f"{daemon.url}/ui#token={daemon.token}"
    async with session.get(url.partition("#")[0]) as response:
        assert response.status == 200
        assert response.content_type == "text/html"
    opened_with = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(
        f"import sys, pathlib; pathlib.Path({str(opened_with)!r}).write_text(sys.argv[1])\n"
    )
    code, out, err = await condensate(
        daemon.home, "ui", "--open", BROWSER=f"{sys.executable} {browser} %s"
    )
    assert code == 0, err
    assert out.strip() == url
    assert opened_with.read_text() == url


async def test_condensate_ui_without_a_daemon_says_so(tmp_path: Path) -> None:
    """With no daemon to show, ``condensate ui`` exits 2 and names ``condensate serve``."""
    code, out, err = await condensate(tmp_path, "ui")
    assert code == 2
    assert out == ""
    assert "condensate serve" in err
