"""Chapter 12 mutants, one file per part."""

# ruff: noqa: F401
from . import ch12_ddp
