"""return a container whose items compare equal to anything (a subclass of int inside a list)."""


class _Eq(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def attack(shape):
    return [_Eq(1)] * len(shape)
