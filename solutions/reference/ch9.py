"""Chapter 9 references, one file per part (each written by its own hand)."""

# ruff: noqa: F401, F403
from .ch9_dynamic import *
from .ch9_remat import *
from .ch9_train import *
