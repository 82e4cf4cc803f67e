"""Terminal benchmark: how soon the chat shows an answer, and what ``dsh run -p`` costs.

Run: ``.venv/bin/python -m bench.terminal`` (``--quick`` for a smoke run). The peers are
the ``bench`` extra's (``pip install -e '.[dev,bench]'``); a peer that is not installed
is reported as missing.

Rows, each a wall time measured from this process, interleaved round by round:

* ``Enter → first answer character``: a ``dsh run`` of the keyless echo agent (a
  scripted model that answers at once) on a pty, as a terminal runs it: this process
  is the terminal (it answers the cursor position requests prompt_toolkit sends). At
  each prompt it writes a line and Enter and times until the first characters of the
  answer (``You said``) are read back from the pty; several turns per process, several
  processes. That path is the line editor closing, the turn starting, the spinner's
  first frame, the model call and the first delta drawn by the live region.
* ``dsh run -p``: ``python -m dsh run examples/echo-agent/dsh.yml -p hi`` from start
  to exit.
* ``python -c "import pydantic_ai"`` and ``python -c "import agents"`` (openai-agents):
  the peers, beside ``python -c pass`` (the interpreter's own start).

Each dsh row is divided by the faster peer import; the goal is at most 0.5x. The import
cost of the terminal chat's libraries (``python -X importtime``: prompt_toolkit and
rich) is printed too, with a check that ``dsh run -p`` imports neither: the chat
imports them when it starts, before its first prompt.
"""

from __future__ import annotations

import os
import pty
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).parents[1]
ECHO = ROOT / "examples" / "echo-agent" / "dsh.yml"
#: How long any one wait may take before the benchmark gives up (a guard, not a pace).
GUARD = 60.0
PEERS = {"import pydantic_ai": "pydantic_ai", "import agents": "agents"}
CPR = b"\x1b[6n"
#: What prompt_toolkit writes last when the prompt is drawn (it shows the cursor).
PROMPT_DRAWN = b"\x1b[?25h"
ANSWER = b"You said"


class Chat:
    """``dsh run`` of the echo agent on a pty; this process plays the terminal."""

    def __init__(self, state: Path) -> None:
        env = {**os.environ, "TERM": "xterm-256color", "XDG_STATE_HOME": str(state)}
        env.pop("NO_COLOR", None)
        pid, fd = pty.fork()
        if pid == 0:  # the child
            try:
                os.execve(sys.executable, [sys.executable, "-m", "dsh", "run", str(ECHO)], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.seen = b""
        self.mark = 0  # what has been waited for so far

    def read_until(self, marker: bytes, start: int) -> float:
        """Read until ``marker`` appears at or after offset ``start``; the time of the
        read that brought it. Cursor position requests are answered on the way."""
        deadline = time.monotonic() + GUARD
        arrived = time.perf_counter()
        while self.seen.find(marker, start) < 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {marker!r} in {GUARD}s: {self.seen[-300:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            data = os.read(self.fd, 65536)
            arrived = time.perf_counter()
            if not data:
                raise EOFError(f"dsh run ended: {self.seen[-300:]!r}")
            for _ in range(data.count(CPR)):
                os.write(self.fd, b"\x1b[1;1R")
            self.seen += data
        return arrived

    def prompt(self) -> None:
        """Wait until the next prompt is drawn and waiting for keys."""
        self.read_until(CPR, self.mark)
        self.mark = self.seen.index(CPR, self.mark) + len(CPR)
        self.read_until(PROMPT_DRAWN, self.mark)
        self.mark = self.seen.index(PROMPT_DRAWN, self.mark) + len(PROMPT_DRAWN)

    def turn(self, line: bytes) -> float:
        """Send ``line``; seconds from Enter to the first answer characters."""
        os.write(self.fd, line + b"\r")
        sent = time.perf_counter()
        took = self.read_until(ANSWER, self.mark) - sent
        self.mark = self.seen.index(ANSWER, self.mark) + len(ANSWER)
        return took

    def close(self) -> None:
        os.write(self.fd, b"\x04")  # Ctrl-D
        try:
            while os.read(self.fd, 65536):
                pass
        except OSError:  # EIO: the child closed the terminal
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def enter_to_first_character(processes: int, turns: int) -> tuple[list[float], list[float]]:
    """(Enter → first answer character, launch → first prompt), seconds per sample."""
    firsts: list[float] = []
    starts: list[float] = []
    with tempfile.TemporaryDirectory() as state:
        for _ in range(processes):
            launched = time.perf_counter()
            chat = Chat(Path(state))
            try:
                chat.prompt()
                starts.append(time.perf_counter() - launched)
                for n in range(turns):
                    firsts.append(chat.turn(b"hello %d" % n))
                    chat.prompt()
            finally:
                chat.close()
    return firsts, starts


def wall(argv: list[str]) -> Callable[[], float]:
    """A sampler: run ``argv`` to its end; its wall time in seconds."""

    def run() -> float:
        start = time.perf_counter()
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        took = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{argv} failed: {done.stderr.decode()[-500:]}")
        return took

    return run


def import_cost(modules: list[str]) -> dict[str, float]:
    """Seconds each module's import takes in a fresh interpreter (``-X importtime``,
    cumulative, the modules imported one after another)."""
    code = "; ".join(f"import {m}" for m in modules)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    )
    found: dict[str, float] = {}
    for line in done.stderr.splitlines():
        match = re.fullmatch(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)", line)
        if match and match.group(2) in modules:
            found[match.group(2)] = int(match.group(1)) / 1e6
    return found


def imported_by_one_shot() -> list[str]:
    """Which UI libraries ``dsh run -p`` imports (it should be none)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dsh", "run", str(ECHO), "-p", "hi"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    return sorted(n for n in ("prompt_toolkit", "rich", "markdown_it") if n in names)


def main(quick: bool) -> None:
    rounds = 3 if quick else 15
    samplers: dict[str, Callable[[], float]] = {
        "python -c pass": wall([sys.executable, "-c", "pass"]),
        "dsh run -p": wall([sys.executable, "-m", "dsh", "run", str(ECHO), "-p", "hi"]),
    }
    missing = []
    for name, module in PEERS.items():
        if find_spec(module) is None:
            missing.append(name)
        else:
            samplers[name] = wall([sys.executable, "-c", f"import {module}"])
    samples: dict[str, list[float]] = {name: [] for name in samplers}
    for sampler in samplers.values():
        sampler()  # warm the file cache
    for _ in range(rounds):
        for name, sampler in samplers.items():
            samples[name].append(sampler())
    firsts, starts = enter_to_first_character(2 if quick else 5, 5 if quick else 20)
    samples["Enter → first answer character"] = firsts
    samples["dsh run: launch → first prompt"] = starts

    medians = {name: statistics.median(values) for name, values in samples.items()}
    peers = [medians[name] for name in PEERS if name in medians]
    faster = min(peers) if peers else None
    width = max(len(name) for name in medians)
    print(f"\nterminal chat and one-shot run vs peer imports (medians, {sys.platform})")
    print(f"{'':<{width}}  {'ms':>9}  {'n':>4}  ratio to the faster peer import")
    for name, value in medians.items():
        ratio = "" if faster is None else f"{value / faster:7.3f}x"
        print(f"{name:<{width}}  {value * 1e3:9.2f}  {len(samples[name]):>4}  {ratio}")
    for name in missing:
        print(f"{name:<{width}}  (not installed: pip install -e '.[dev,bench]')")

    costs = import_cost(["prompt_toolkit", "rich.console", "rich.live", "rich.markdown"])
    total = sum(costs.values())
    listed = ", ".join(f"{m} {s * 1e3:.1f}" for m, s in costs.items())
    print(f"\nUI libraries' import (-X importtime, ms): {listed}; together {total * 1e3:.1f}")
    leaked = imported_by_one_shot()
    print(f"imported by dsh run -p: {', '.join(leaked) or 'none (lazy)'}")
    if faster is not None:
        goals = [
            ("Enter → first answer character", medians["Enter → first answer character"]),
            ("dsh run -p", medians["dsh run -p"]),
        ]
        verdicts = ", ".join(
            f"{name} {'met' if value <= faster / 2 else 'MISSED'}" for name, value in goals
        )
        print(f"goal <= 0.5x the faster peer import ({faster * 1e3:.0f} ms): {verdicts}")


if __name__ == "__main__":
    main("--quick" in sys.argv)
