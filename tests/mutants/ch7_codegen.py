"""Chapter 7 (codegen) known-wrong implementations."""
