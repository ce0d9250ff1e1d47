"""Chapter 2: reverse-mode automatic differentiation on the shared op registry."""

__all__: list[str] = []
