"""Startup benchmark: ``import dsh`` as a whole process, beside ``python -c pass``.

Run: ``.venv/bin/python -m bench.startup`` (``--quick`` for a smoke run, ``--rounds R``).
cordis-python's ``import cordis`` is a peer when it is installed (see ``bench/runtime.py``
for how), else its row is skipped with a message.

Each command is a fresh interpreter (this one), run in turn, round after round; each row
is the median wall time and the median CPU time (user + system, from the children's
resource usage) with the ratio to ``python -c pass``. Byte code is written to and read
from a temporary cache directory for every command alike (``PYTHONPYCACHEPREFIX``; one
untimed warm-up run each), so a package installed with its ``.pyc`` files and a source
checkout compare fairly even where ``PYTHONDONTWRITEBYTECODE`` is set.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "python -c pass": "pass",
    "import anyio, pluggy (dsh's floor)": "import anyio, pluggy",
    "import dsh": "import dsh",
    "import cordis (cordis-python)": "import cordis",
}
BASE = "python -c pass"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(code: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``python -c code``."""
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return time.perf_counter() - start, _children_cpu() - cpu


def main() -> None:
    quick = "--quick" in sys.argv
    rounds = 5 if quick else 21
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
    commands = dict(COMMANDS)
    if importlib.util.find_spec("cordis") is None:
        print("cordis-python is not installed: its row is skipped (see bench/runtime.py).")
        del commands["import cordis (cordis-python)"]
    print(f"dsh startup benchmark (python {sys.version.split()[0]}, {rounds} rounds)")
    with tempfile.TemporaryDirectory(prefix="dsh-bench-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for code in commands.values():
            run_once(code, env)  # warm-up: byte code written
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, code in commands.items():
                wall, cpu = run_once(code, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    wall_base = statistics.median(walls[BASE])
    cpu_base = statistics.median(cpus[BASE])
    width = max(len(name) for name in commands)
    print(f"\n{'':<{width}}{'wall ms':>12}{'(x)':>9}{'cpu ms':>12}{'(x)':>9}")
    for name in commands:
        wall = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        print(
            f"{name:<{width}}{wall * 1e3:>12.1f}{wall / wall_base:>8.2f}x"
            f"{cpu * 1e3:>12.1f}{cpu / cpu_base:>8.2f}x"
        )


if __name__ == "__main__":
    main()
