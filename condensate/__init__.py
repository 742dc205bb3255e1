"""Condensate: a context manager for long-running coding agents.

Every thread has an append-only event log; the model's view is folded from it before each
call, measured against a working ceiling and cut in tiers, cheapest first. The layers, each a
folder whose ``__init__`` states its rule (``tests/unit/test_layout.py`` keeps them):

- ``core/``: the pure core (projector, meter, ceilings, planner, tiers, summary, tokens, ...).
  No I/O, no awaits; it imports only itself, ``events`` and ``errors``.
- ``events``, ``errors``: the log's event types and the error tree, shared by every layer.
- ``eventlog/``: the append-only store behind one contract, SQLite and PostgreSQL, archives
  and the rebuild of a view from the log. It never imports the runtime.
- ``runtime/``: threads and their turns, asks, approvals, the curator's calls, recovery after
  a restart, the fleet; live, metrics and webhook subscribe to its appends.
- ``engine/``: the plug-in contract the engines in ``adapters/`` implement, the registry of
  those installed (entry points), the context tools' MCP server.
- ``gateway/``: the model gateway in the CLI engines' request path, one dialect per API.
- ``providers/``: model API clients; ``api/``: the HTTP contract the server and ``client``
  share; ``http/``: the HTTP edge; ``cli/``: the command line; ``replay/``: offline replays.
- ``app``: the composition root, the only module that imports ``http`` and ``adapters``;
  ``settings``, ``config``, ``statedir``, ``logs``: how a process is set up.
- ``testing/``: the fake model server, builders and the contract suites, shipped so that an
  out-of-tree event-log backend or engine can prove itself.
"""

__version__ = "0.1.0"
