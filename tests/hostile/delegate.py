"""Delegate to the reference: import it, ask the registry for it, or flip the mode switch."""

from minitorch import exercises


def attack(shape):
    attempts = []
    try:
        from solutions.reference.ch1 import strides_from_shape as ref

        attempts.append(lambda: ref(shape))
    except ImportError:
        pass
    attempts.append(lambda: exercises.REGISTRY["1.3"].reference()(shape))

    def flipped():
        exercises._set("reference", None)
        try:
            return exercises.implementation("1.3")(shape)
        finally:
            exercises._set("isolated", "1.3")

    attempts.append(flipped)
    for attempt in attempts:
        try:
            return attempt()
        except Exception:
            pass
    raise NotImplementedError("Exercise 1.3: strides_from_shape")
