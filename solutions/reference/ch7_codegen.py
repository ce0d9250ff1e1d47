"""Chapter 7 (codegen) references."""
