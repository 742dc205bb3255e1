"""Test support shipped with Condensate, for its own tests and for an out-of-tree engine or
log backend proving itself: the fake model server (``fake_model``, with the reactive agent;
``replay`` runs it as its stand-in model), thread builders (``threads``), builders of values
with keyword defaults (``builders``), a scripted turn context (``turns``), a daemon in a
subprocess (``daemon``), and the contract suites each implementation subclasses (``eventlog``
for a log backend, ``engines`` for an engine). The daemon never imports it.
"""
