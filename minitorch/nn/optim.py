"""Chapter 2: optimizers."""
