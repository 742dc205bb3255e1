"""Gateway latency: what the daemon's model gateway adds to one model request.

A real daemon (``python -m condensate serve``) runs a Claude Code thread against a fake model
server in a process of its own; the thread's first turn gives a real Claude Code request (its
body and headers, as the fake recorded them) and the CLI's gateway pass (read from the CLI's
environment). Then the same streamed request is sent N times each way, alternating so that
both see the same machine load:

* **direct**: to the fake, with the daemon's key, as a CLI without Condensate would;
* **gateway**: to the daemon's ``/gateway/anthropic/v1/messages`` with the pass: checked,
  measured against the thread's line, forwarded, streamed back, and its usage logged (an
  SQLite append) before the reply's last event is passed on;
* **attached**: as a person's own Claude Code sends it through ``condensate claude``: through
  the wrapper's loopback relay to the base URL ``POST /attach`` gave (the pass in its path),
  with the person's own key: also read against the session's log (what goes past it is
  logged) on every request.

With ``--history N`` the session is a long one: each request carries N exchanges (a Bash
call and its output of about 1.5 KB, each different) after the CLI's first message, and each
pair of requests one exchange more, as a session that goes on; the three arms send the same
body in a pair. N = 150 with 100 pairs stays under Claude Code's line (200,000 tokens less the
reserve), so no window is taken: only the latency is measured.

A request is timed from sending it to reading the last byte of its stream; each is followed
by a 5 ms pause, as a CLI runs tools between its requests. Added latency =
the gateway's median (p99) less the direct median (p99); the median of the per-pair
differences is reported too. Target: at most 2 ms added at the median.

    python benchmarks/gateway_latency.py                # a table
    python benchmarks/gateway_latency.py --json         # one JSON object
    python benchmarks/gateway_latency.py --requests 20  # CI
    python benchmarks/gateway_latency.py --history 150 --requests 100   # a long session
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from condensate.cli.relay import Relay
from tests.integration.daemon import REPO, DaemonProcess, call, fake_process
from tests.integration.procs import environ_of

MODEL = "anthropic:claude-opus-5-5"
REQUESTS = 300
GAP = 0.005
"""A pause after each request: a CLI sends its next one after running the model's tools, so
neither arm is timed while the other's tail work (the gateway logs a call's count after the
reply has gone out) runs."""
TIMEOUT = 90.0
HOP = frozenset({"host", "content-length", "x-api-key", "authorization", "accept-encoding"})


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "median_ms": ms(statistics.median(seconds)),
        "p99_ms": ms(percentile(seconds, 0.99)),
        "min_ms": ms(min(seconds)),
    }


async def first_turn(
    session: aiohttp.ClientSession, daemon: DaemonProcess, work: Path
) -> tuple[str, int]:
    """A Claude Code thread's first turn: the thread, and its CLI's pid."""
    status, created = await call(
        session,
        daemon,
        "POST",
        "/threads",
        {"engine": "claude", "model": MODEL, "cwd": str(work), "brief": "Say hello."},
    )
    if status != 201:
        msg = f"the daemon refused the thread: {created}"
        raise RuntimeError(msg)
    thread = str(created["id"])
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        status, page = await call(
            session, daemon, "GET", f"/threads/{thread}/tail?after=0&limit=1000&wait=10"
        )
        events = page["events"] if status == 200 else []
        if any(e["kind"] == "turn.ended" for e in events):
            started = [e for e in events if e.get("notice") == "session-started"][-1]
            pid = next(w for w in started["detail"].split() if w.startswith("pid="))
            return thread, int(pid[4:])
    msg = f"the first turn did not end:\n{daemon.log_tail()}"
    raise RuntimeError(msg)


def exchange(k: int) -> list[dict[str, Any]]:
    """The ``k``th Bash call of a long session and its output (about 1.5 KB, its own)."""
    use = {
        "type": "tool_use",
        "id": f"toolu_h{k}",
        "name": "Bash",
        "input": {"command": f"cat src/m{k}.py"},
    }
    lines = "".join(f"def f{k}_{j}(x):\n    return x * {k * 31 + j} + {j}\n" for j in range(36))
    result = {"type": "tool_result", "tool_use_id": use["id"], "content": lines}
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"Reading m{k}."}, use]},
        {"role": "user", "content": [result]},
    ]


def with_history(sent: dict[str, Any], exchanges: int) -> bytes:
    """The CLI's recorded request with ``exchanges`` exchanges after its first message."""
    body = dict(sent)
    history = [m for k in range(exchanges) for m in exchange(k)]
    body["messages"] = [*sent["messages"], *history]
    return json.dumps(body).encode()


async def timed(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str]
) -> float:
    started = time.perf_counter()
    async with session.post(url, data=body, headers=headers) as response:
        await response.read()
        if response.status != 200:
            msg = f"{url} answered {response.status}"
            raise RuntimeError(msg)
    return time.perf_counter() - started


async def measure(requests: int, work: Path, history: int = 0) -> dict[str, Any]:
    async with fake_process() as fake_url:
        home = work / "home"
        home.mkdir()
        binary = str(REPO / "node_modules" / ".bin" / "claude")
        daemon = DaemonProcess(home, fake_url, extra_env={"CONDENSATE_CLAUDE_BINARY": binary})
        await asyncio.to_thread(daemon.start)
        try:
            async with aiohttp.ClientSession() as session:
                thread, pid = await first_turn(session, daemon, work)
                credential = environ_of(pid)["ANTHROPIC_API_KEY"]
                async with session.get(f"{fake_url}/_fake/requests") as answer:
                    recorded = [
                        r for r in (await answer.json())["requests"] if r["endpoint"] == "messages"
                    ]
                sent = recorded[0]
                body = with_history(sent["body"], history)
                headers = {k: v for k, v in sent["headers"].items() if k.lower() not in HOP}
                direct_url = f"{fake_url}{sent['path']}"
                gateway_url = f"{daemon.url}/gateway/anthropic{sent['path']}"
                direct_headers = {**headers, "x-api-key": "sk-test"}
                gateway_headers = {**headers, "x-api-key": credential}
                attach = {"engine": "claude", "cwd": str(work), "pid": os.getpid()}
                status, attached = await call(session, daemon, "POST", "/attach", attach)
                if status != 201:
                    msg = f"the daemon refused the session: {attached}"
                    raise RuntimeError(msg)
                base = attached["launch"]["env"]["ANTHROPIC_BASE_URL"]
                # Through the wrapper's relay, as `condensate claude` runs the CLI.
                relay = Relay(daemon.url)
                attached_url = f"{base.replace(daemon.url, relay.start())}{sent['path']}"
                for _ in range(5):  # warm every path's connections
                    await timed(session, direct_url, body, direct_headers)
                    await timed(session, gateway_url, body, gateway_headers)
                    await timed(session, attached_url, body, direct_headers)
                direct: list[float] = []
                through: list[float] = []
                person: list[float] = []
                for n in range(requests):
                    if history:
                        body = with_history(sent["body"], history + n + 1)
                    direct.append(await timed(session, direct_url, body, direct_headers))
                    await asyncio.sleep(GAP)
                    through.append(await timed(session, gateway_url, body, gateway_headers))
                    await asyncio.sleep(GAP)
                    person.append(await timed(session, attached_url, body, direct_headers))
                    await asyncio.sleep(GAP)
                relay.stop()
                status, shown = await call(session, daemon, "GET", f"/threads/{thread}")
        finally:
            await asyncio.to_thread(daemon.close)
    ours, theirs, own = summary(through), summary(direct), summary(person)
    return {
        "request_bytes": len(body),
        "cli_request_bytes": len(json.dumps(sent["body"]).encode()),
        "history_exchanges": history,
        "direct": theirs,
        "gateway": ours,
        "attached": own,
        "attached_added_median_ms": round(own["median_ms"] - theirs["median_ms"], 3),
        "attached_paired_added_median_ms": ms(
            statistics.median(t - d for t, d in zip(person, direct, strict=True))
        ),
        "added_median_ms": round(ours["median_ms"] - theirs["median_ms"], 3),
        "added_p99_ms": round(ours["p99_ms"] - theirs["p99_ms"], 3),
        "paired_added_median_ms": ms(
            statistics.median(t - d for t, d in zip(through, direct, strict=True))
        ),
        "calls_logged": shown["costs"]["calls"] if status == 200 and "costs" in shown else None,
    }


def run(requests: int, history: int = 0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="condensate-gateway-latency-") as tmp:
        measured = asyncio.run(measure(requests, Path(tmp), history))
    return {
        "benchmark": "gateway_latency",
        "command": shlex.join(["python", *sys.argv]),
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
        },
        "model": MODEL,
        "requests": requests,
        **measured,
    }


def table(report: dict[str, Any]) -> str:
    d, g = report["direct"], report["gateway"]
    return "\n".join(
        [
            f"gateway_latency: {report['requests']} streamed requests each way, "
            f"{report['request_bytes']:,} bytes (a real Claude Code request, "
            f"{report['history_exchanges']} earlier exchanges and one more a pair; the last "
            "request's size); python "
            f"{report['machine']['python']}, {report['machine']['cpu_count']} cpus; "
            f"{report['command']}",
            f"  direct   median {d['median_ms']} ms, p99 {d['p99_ms']} ms (min {d['min_ms']})",
            f"  gateway  median {g['median_ms']} ms, p99 {g['p99_ms']} ms (min {g['min_ms']})",
            f"  added: median {report['added_median_ms']} ms, p99 {report['added_p99_ms']} ms, "
            f"median of pairs {report['paired_added_median_ms']} ms",
            f"  attached (condensate claude) median {report['attached']['median_ms']} ms: added "
            f"{report['attached_added_median_ms']} ms, median of pairs "
            f"{report['attached_paired_added_median_ms']} ms",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--requests", type=int, default=REQUESTS, help="requests each way")
    parser.add_argument(
        "--history", type=int, default=0, help="earlier exchanges each request carries"
    )
    args = parser.parse_args(argv)
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    if args.history < 0:
        parser.error("--history must be at least 0")
    report = run(args.requests, args.history)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
