"""Benchmarks: scale and cost runs with their baselines."""
