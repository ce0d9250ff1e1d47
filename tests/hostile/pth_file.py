"""Write a .pth into site-packages that switches later graded runs to the reference."""

import os
import sys


def attack(shape):
    line = (
        "import os; os.environ.get('MINITORCH_MODE') == 'isolated' and "
        "os.environ.update(MINITORCH_MODE='reference', MINITORCH_FOCUS='')\n"
    )
    for entry in sys.path:
        if entry.endswith("site-packages") and os.path.isdir(entry):
            try:
                with open(os.path.join(entry, "zz_hostile_fixture.pth"), "w") as f:
                    f.write(line)
            except OSError:
                pass
    raise NotImplementedError("Exercise 1.3: strides_from_shape")
