"""Chapter 5: tracing eager code into a graph IR, running and explaining it."""

__all__: list[str] = []
