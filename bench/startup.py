"""Startup benchmark: fresh processes, beside ``python -c pass``.

Run: ``.venv/bin/python -m bench.startup`` (``--quick`` for a smoke run, ``--rounds R``).

Rows: ``import dsh``; the third-party floor of a run (pydantic's ``BaseModel``, PyYAML,
pluggy, and an anyio event loop run once); the whole one-shot command ``dsh run
examples/echo-agent/dsh.yml -p "echo hello"`` (load the deployment, one turn with one
tool call, print the answer);
and its peer, pydantic-ai's one-shot: a fresh interpreter that imports pydantic-ai,
builds an ``Agent`` with a ``FunctionModel`` and one tool, runs one prompt (one tool
call) and prints the answer. cordis-python's ``import cordis`` is a peer when it is
installed (see ``bench/runtime.py`` for how), and pydantic-ai when the ``bench`` extra
is; a missing peer's row is skipped with a message.

Each command is a fresh interpreter (this one), run in turn, round after round; each row
is the median wall time and the median CPU time (user + system, from the children's
resource usage) with the ratio to ``python -c pass``; the one-shot rows also print
dsh's ratio to pydantic-ai. Byte code is written to and read from a temporary cache
directory for every command alike (``PYTHONPYCACHEPREFIX``; one untimed warm-up run
each), so a package installed with its ``.pyc`` files and a source checkout compare
fairly even where ``PYTHONDONTWRITEBYTECODE`` is set.
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
from pathlib import Path

#: The example deployment ``dsh run`` loads (a scripted model and an ``echo`` tool).
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "echo-agent" / "dsh.yml"

#: pydantic-ai's one-shot: the same turn as the example's, in one fresh interpreter.
PAI_ONE_SHOT = '''
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

def reply(messages, info):
    returned = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"The echo tool returned: {returned[-1]}")])
    return ModelResponse(parts=[ToolCallPart("echo", {"text": "hello"})])

agent = Agent(FunctionModel(reply), instructions="Answer briefly.")

@agent.tool_plain
def echo(text: str) -> str:
    """Echo the text."""
    return text

print(agent.run_sync("echo hello").output)
'''

BASE = "python -c pass"
DSH_RUN = "dsh run echo -p"
PAI_RUN = "pydantic-ai one-shot"
#: What any ``dsh run`` imports and does whatever dsh does: pydantic's models, YAML,
#: pluggy, an event loop started by anyio.
RUN_FLOOR = "pydantic, yaml, anyio.run (a run's floor)"
#: The same with one model built and validated, as every run does (a plugin's config, a
#: tool's arguments): the first model built imports the rest of pydantic (``fields``,
#: ``types``, ``annotated_types``) and its plugin loader (``importlib.metadata``, which
#: reads the installed distributions for the ``pydantic`` group).
RUN_MODEL_FLOOR = "... and one model built and validated"
COMMANDS: dict[str, list[str]] = {
    BASE: ["-c", "pass"],
    "import anyio, pluggy (dsh's floor)": ["-c", "import anyio, pluggy"],
    "import dsh": ["-c", "import dsh"],
    RUN_FLOOR: [
        "-c",
        "import anyio, pluggy, yaml; from pydantic import BaseModel; anyio.run(anyio.sleep, 0)",
    ],
    RUN_MODEL_FLOOR: [
        "-c",
        "import anyio, pluggy, yaml; from pydantic import BaseModel\n"
        "class Args(BaseModel):\n    text: str\n"
        "Args.model_validate({'text': 'hello'}); anyio.run(anyio.sleep, 0)",
    ],
    "import cordis (cordis-python)": ["-c", "import cordis"],
    DSH_RUN: ["-m", "dsh", "run", str(EXAMPLE), "-p", "echo hello"],
    PAI_RUN: ["-c", PAI_ONE_SHOT],
}
#: The peers, by row: the module whose absence skips the row, and how to get it.
PEERS = {
    "import cordis (cordis-python)": (
        "cordis",
        "cordis-python is not installed (see bench/runtime.py)",
    ),
    PAI_RUN: ("pydantic_ai", "pydantic-ai is not installed (pip install -e '.[bench]')"),
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``python *args`` (its output discarded)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, *args],
        check=True,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start, _children_cpu() - cpu


def main() -> None:
    quick = "--quick" in sys.argv
    rounds = 5 if quick else 21
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
    commands = dict(COMMANDS)
    for name, (module, why) in PEERS.items():
        if importlib.util.find_spec(module) is None:
            print(f"{why}: the row {name!r} is skipped.")
            del commands[name]
    print(f"dsh startup benchmark (python {sys.version.split()[0]}, {rounds} rounds)")
    with tempfile.TemporaryDirectory(prefix="dsh-bench-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for args in commands.values():
            run_once(args, env)  # warm-up: byte code written
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, args in commands.items():
                spent, used = run_once(args, env)
                walls[name].append(spent)
                cpus[name].append(used)
    wall = {name: statistics.median(times) for name, times in walls.items()}
    cpu = {name: statistics.median(times) for name, times in cpus.items()}
    width = max(len(name) for name in commands)
    print(f"\n{'':<{width}}{'wall ms':>12}{'(x)':>9}{'cpu ms':>12}{'(x)':>9}")
    for name in commands:
        print(
            f"{name:<{width}}{wall[name] * 1e3:>12.1f}{wall[name] / wall[BASE]:>8.2f}x"
            f"{cpu[name] * 1e3:>12.1f}{cpu[name] / cpu[BASE]:>8.2f}x"
        )
    if PAI_RUN in commands:
        print(
            f"\n{DSH_RUN} / {PAI_RUN}: wall {wall[DSH_RUN] / wall[PAI_RUN]:.3f}x, "
            f"cpu {cpu[DSH_RUN] / cpu[PAI_RUN]:.3f}x"
        )


if __name__ == "__main__":
    main()
