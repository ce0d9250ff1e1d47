"""Chapter 12 references, one file per part."""

# ruff: noqa: F401, F403
from .ch12_ddp import *
