"""Chapter 2: modules, parameters, layers, losses, optimizers and data loading."""

from . import functional, optim  # noqa: F401
from .data import DataLoader, load_digits
from .module import Linear, Module, Parameter, ReLU, Sequential, Sigmoid, Tanh, find_parameters
from .optim import SGD, Adam
from .train import evaluate, fit, mlp, train_digits

__all__ = [
    "SGD",
    "Adam",
    "DataLoader",
    "Linear",
    "Module",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Tanh",
    "evaluate",
    "find_parameters",
    "fit",
    "functional",
    "load_digits",
    "mlp",
    "optim",
    "train_digits",
]
