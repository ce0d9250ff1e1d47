"""Chapter 9 (train) known-wrong implementations."""
