"""Condensate: a context manager for long-running coding agents.

Every thread has an append-only event log; the model-facing view is folded from it before each
call (``projector``), measured against a working ceiling (``meter``, ``ceilings``) and cut in
tiers, cheapest first (``planner``, ``tiers``). The core is pure; ``store`` is the SQLite edge.
"""

__version__ = "0.1.0"
