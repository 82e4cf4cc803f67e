"""Hook scripts for the hooks tests: each records its stdin (and environment) to a file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.core.lifeline_support import await_exits

__all__ = ["gone", "python_hook", "records", "shell_hook"]

PATIENCE = 30.0


def shell_hook(folder: Path, name: str, body: str) -> str:
    """A bash hook script ``name`` that appends its stdin as one line to ``name.log``
    (then runs ``body``); returns the command that runs it."""
    script = folder / f"{name}.sh"
    log = folder / f"{name}.log"
    script.write_text(
        "#!/bin/bash\n"
        f'input=$(cat); printf "%s\\n" "$input" >> "{log}"\n'
        f'printf "%s %s %s\\n" "$PWD" "$CLAUDE_PROJECT_DIR" "$DSH_SESSION_ID" >> "{log}.env"\n'
        f"{body}\n"
    )
    script.chmod(0o755)
    return str(script)


def python_hook(folder: Path, name: str, body: str) -> str:
    """A Python hook script ``name``: ``data`` is its stdin (decoded), recorded to
    ``name.log``; then ``body`` runs. Returns the command that runs it."""
    script = folder / f"{name}.py"
    log = folder / f"{name}.log"
    script.write_text(
        "import json, sys\n"
        "raw = sys.stdin.read()\n"
        f"open({str(log)!r}, 'a').write(raw + '\\n')\n"
        "data = json.loads(raw)\n"
        f"{body}\n"
    )
    return f"{sys.executable} {script}"


def records(folder: Path, name: str) -> list[dict[str, Any]]:
    """What the hook ``name`` read on stdin, one object per run."""
    log = folder / f"{name}.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def gone(pid: int) -> bool:
    """Wait (bounded) until ``pid`` has exited (a zombie counts as exited): on its pidfd,
    which the kernel makes readable when the process ends."""
    await_exits([pid], PATIENCE)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"
