"""Chapter 9 (dynamic) known-wrong implementations."""
