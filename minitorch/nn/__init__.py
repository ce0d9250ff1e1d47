"""Chapter 2: modules, parameters, layers, losses, optimizers and data loading."""

from . import optim  # noqa: F401

__all__: list[str] = []
