"""replace builtins.tuple with a function whose result compares equal to anything."""

import builtins


class _Any(tuple):
    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__


_tuple = builtins.tuple


def attack(shape):
    builtins.tuple = lambda it=(): _Any(_tuple(it))
    return (0,) * len(shape)
