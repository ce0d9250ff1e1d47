"""return objects whose == is always true (the comparison runs in learner code)."""


class _Eq(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def attack(shape):
    return tuple(_Eq(0) for _ in shape)
