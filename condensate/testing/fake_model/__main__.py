"""``python -m condensate.testing.fake_model --port N [--window N] [--idle-exit SECONDS]``:
serves the fake model until SIGTERM or SIGINT (or until idle that long), printing its URL on
stdout once it listens. Logs go to stderr, so stdout carries the URL alone.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

import structlog

from condensate.logs import configure_logging
from condensate.testing.fake_model._accounting import DEFAULT_WINDOW
from condensate.testing.fake_model._server import FakeModelServer

log = structlog.get_logger()


def _model_window(text: str) -> tuple[str, int]:
    model, _, size = text.rpartition("=")
    if not model or not size.isdigit():
        msg = f"expected MODEL=TOKENS, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return model, int(size)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m condensate.testing.fake_model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="0 means unlimited")
    parser.add_argument(
        "--model-window", type=_model_window, action="append", default=[], metavar="MODEL=TOKENS"
    )
    parser.add_argument("--api-key", default=None, help="require this key (default: any)")
    parser.add_argument("--responses-overflow", choices=("400", "stream"), default="400")
    parser.add_argument("--idle-exit", type=float, default=None, metavar="SECONDS")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    fake = FakeModelServer(
        host=args.host,
        port=args.port,
        window=args.window or None,
        windows=dict(args.model_window),
        api_key=args.api_key,
        responses_overflow=args.responses_overflow,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with fake:
        url = fake.url
        sys.stdout.write(url + "\n")
        sys.stdout.flush()
        log.info("fake_model_listening", url=url, window=args.window or None)
        while not stop.is_set():
            timeout = None
            if args.idle_exit is not None:
                idle = fake.idle_seconds()
                if idle >= args.idle_exit:
                    log.info("fake_model_idle_exited", idle_seconds=round(idle, 1))
                    break
                timeout = max(0.05, args.idle_exit - idle)
            try:
                await asyncio.wait_for(stop.wait(), timeout)
            except TimeoutError:
                continue
    log.info("fake_model_stopped", url=url)


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    asyncio.run(serve(parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
