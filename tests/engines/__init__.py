"""Engines defined by the tests, to show that an engine plugs in without a core edit."""
