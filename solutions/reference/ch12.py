"""Chapter 12 references, one file per part (each written by its own hand)."""

# ruff: noqa: F401, F403
from .ch12_compile import *
from .ch12_ddp import *
from .ch12_ring import *
