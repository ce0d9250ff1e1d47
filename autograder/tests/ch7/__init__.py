"""Graded tests, chapter 7: fusion grouping (test_group_*) and code generation."""
