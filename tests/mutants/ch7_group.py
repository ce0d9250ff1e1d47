"""Chapter 7 (group) known-wrong implementations."""
