"""Leave a detached daemon (double fork, setsid) and 50 sleepers that rewrite results.json later."""

import os
import subprocess
import sys
import time


def attack(shape):
    if os.environ.get("HOSTILE_ONCE"):
        raise NotImplementedError("Exercise 1.3: strides_from_shape")
    os.environ["HOSTILE_ONCE"] = "1"
    # The grader's --json path, found in an ancestor's command line.
    target, pid = None, os.getppid()
    while pid > 1 and target is None:
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
            if "--json" in argv:
                target = os.path.join(cwd, argv[argv.index("--json") + 1])
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    forged = '{"score": 999, "max_score": 2, "tests": []}'
    payload = (
        f"import time\ntime.sleep(3)\nopen({target!r}, 'w').write({forged!r})\n"
        if target
        else "import time\ntime.sleep(30)\n"
    )
    for _ in range(50):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # hostile-sleeper"])
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", payload + "# hostile-daemon"])
        os._exit(0)
    time.sleep(0.2)
    raise NotImplementedError("Exercise 1.3: strides_from_shape")
