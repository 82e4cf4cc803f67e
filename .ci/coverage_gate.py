"""Fail unless every measured file under dsh/ and plugins/ has 100% branch coverage.

coverage.py's ``fail_under`` checks the total only; this reads ``coverage json`` and
checks each file, then lists the ones that fall short.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def main() -> int:
    out = Path(".coverage-gate.json")
    subprocess.run([sys.executable, "-m", "coverage", "json", "-q", "-o", str(out)], check=True)
    files = json.loads(out.read_text())["files"]
    out.unlink()
    short = []
    for name, data in sorted(files.items()):
        summary = data["summary"]
        if summary["percent_covered"] < 100.0:
            missing = data["missing_lines"]
            branches = data.get("missing_branches", [])
            short.append(
                f"{name}: {summary['percent_covered']:.2f}% "
                f"(missing lines {missing}, branches {branches})"
            )
    if short:
        print("per-file branch coverage below 100%:", *short, sep="\n  ")
        return 1
    print(f"coverage gate: {len(files)} files at 100% branch coverage")
    return 0


if __name__ == "__main__":
    sys.exit(main())
