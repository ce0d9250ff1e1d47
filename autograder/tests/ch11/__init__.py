"""Graded tests and benchmarks of chapter 11 (a small transformer)."""
