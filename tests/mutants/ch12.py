"""Chapter 12 mutants, one file per part."""

# ruff: noqa: F401
from . import ch12_compile, ch12_ddp, ch12_ring
