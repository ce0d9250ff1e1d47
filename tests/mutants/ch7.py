"""Chapter 7 mutants, one file per part."""

# ruff: noqa: F401
from . import ch7_codegen, ch7_group, ch7_plan
