"""Chapter 9 mutants, one file per part."""

# ruff: noqa: F401
from . import ch9_dynamic, ch9_remat, ch9_train
