"""Chapter 7 references, one file per part (each written by its own hand)."""

# ruff: noqa: F401, F403
from .ch7_codegen import *
from .ch7_group import *
from .ch7_plan import *
