"""Chapter 12 known-wrong implementations, one file per part."""

from . import ch12_compile  # noqa: F401
