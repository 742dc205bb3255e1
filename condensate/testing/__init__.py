"""Test support shipped with Condensate, for its own tests and for out-of-tree backends and
engines: the fake model server (``fake_model``, with the reactive agent; ``replay`` runs it as
its stand-in model), thread builders (``threads``) and the contract suites. The daemon never
imports it.
"""
