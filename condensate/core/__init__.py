"""The pure core: what a thread's model sees and when to cut it, as functions of the log.

The rule it keeps: sans-I/O. Nothing here reads a file, a socket or a clock it was not
given, nothing awaits, and importing any module of it loads no I/O library (aiohttp, anyio,
sqlite3, psycopg, structlog: ``tests/unit/test_layout.py`` checks each in a subprocess). It
imports only itself, ``condensate.events`` and ``condensate.errors``.

``projector`` folds a thread's events into the model's view; ``meter`` and ``ceilings``
measure it against the working ceiling; ``planner`` and ``tiers`` choose the cut, cheapest
first (microcompact, collapse, summary); ``summary`` is the curator's pure half; ``prompt``
and ``messages`` turn a view into provider-neutral messages; ``preview``, ``refetch``,
``cache_rules`` and ``prices`` say what a cut would cost; ``tokens`` counts (tiktoken loaded on
the first count).
"""
