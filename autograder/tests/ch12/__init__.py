"""Graded tests of chapter 12 (data-parallel training on MPI)."""
