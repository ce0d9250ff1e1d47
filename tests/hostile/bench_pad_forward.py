# ruff: noqa: F821  (plain_backprop, burn_while_timed: tests/hostile/_plain_backprop.py)
"""A correct backward that burns 0.1 s in every call, and a forward padded by 0.2 s whenever it
runs alone: 2.8's figure was (forward_backward - forward) / forward over the learner's own
forward, which the padding drove to 0 (full marks)."""

EXERCISE = "2.8"
_alone = [True]


def _pad_the_lone_forward() -> None:
    import minitorch.nn.functional as F
    from minitorch.nn.module import Module

    loss, zero_grad = F.cross_entropy, Module.zero_grad

    def padded_loss(*args, **kwargs):
        if _alone[0]:
            burn_while_timed(0.2)
        _alone[0] = True
        return loss(*args, **kwargs)

    def zero_grad_first(self, *args, **kwargs):
        _alone[0] = False  # forward_backward zeroes the gradients first: not padded there
        return zero_grad(self, *args, **kwargs)

    F.cross_entropy, Module.zero_grad = padded_loss, zero_grad_first


def attack(root, grad):
    if _alone:  # the first call: patch the forward
        _alone.append(True)
        _pad_the_lone_forward()
    burn_while_timed(0.1)
    return plain_backprop(root, grad)
