"""Test support shipped with Condensate: thread builders (and, later, the fake model server)."""
