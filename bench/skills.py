"""Skills benchmark: assembling and rendering an agent's prompt with 100 skills beside
the same prompt without them, in one run.

Run: ``.venv/bin/python -m bench.skills`` (``--quick`` for a smoke run).

The workload: agent-core with one agent working in a project folder, 20 tools, and the
``skills`` plugin — with no skills at all (the baseline), then with 100 skills in the
project's ``.claude/skills`` (each a folder with a ``SKILL.md``). Each row is one
``assemble`` + ``render_prompt`` of the agent's prompt, as the loop does at each step:

* no skills: the plugin loaded, its folders empty;
* 100 skills, cached: the list reused within ``recheck_seconds`` (the default 1 s):
  what nearly every step costs;
* 100 skills, rechecked: ``recheck_seconds: 0``, so every assembly looks at each folder
  and each ``SKILL.md`` again (one ``stat`` each, nothing re-read): what a step costs
  once a second at most.

The goal (issue 28): cached, at most 1.2x the prompt without skills. Every rendered
prompt is checked (untimed) to hold the skills it should.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

import dsh
from bench._timing import measure_async, print_table
from dsh_agent import assemble_context_for
from dsh_agent_core import AgentCore
from dsh_skills import Skills
from dsh_system_prompt import render_prompt
from dsh_tools import Tool, ToolCall


class _Args(BaseModel):
    text: str


async def _tool(args: _Args, call: ToolCall) -> str:
    return args.text


def _project(root: Path, skills: int) -> Path:
    folder = root / f"project-{skills}"
    for n in range(skills):
        skill = folder / ".claude" / "skills" / f"skill-{n:03d}"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: skill-{n:03d}\ndescription: Do task {n} the way this team does it; "
            f"use when asked about topic {n}.\n---\nStep one.\nStep two.\n"
        )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _projects(tmp: str) -> tuple[Path, Path]:
    root = Path(os.path.realpath(tmp))
    return _project(root, 0), _project(root, 100)


async def _one(project: Path, recheck: float, ops: int, rounds: int) -> float:
    async with dsh.Context() as root:
        await root.plugin(AgentCore, {"model": "bench", "persona": "You are bench-agent."})
        for n in range(20):
            root.tools.register(
                Tool(name=f"tool_{n}", description=f"Tool {n}.", parameters=_Args, execute=_tool)
            )
        await root.plugin(Skills, {"recheck_seconds": recheck, "user": False})
        agent = root.agents.create("bench", model="bench", cwd=str(project))
        context = assemble_context_for(agent)
        prompt: Any = root.system_prompt
        expected = (
            len(list((project / ".claude" / "skills").glob("*")))
            if (project / ".claude").exists()
            else 0
        )

        async def step() -> None:
            for _ in range(ops):
                render_prompt(await prompt.assemble(context))

        text = render_prompt(await prompt.assemble(context))
        assert text.count("\n- skill-") == expected, "the prompt lacks skills"
        result = await measure_async({"step": step}, ops, rounds)
        return result["step"]


async def _run(quick: bool) -> None:
    ops, rounds = (20, 3) if quick else (200, 15)
    with tempfile.TemporaryDirectory() as tmp:
        empty, full = _projects(tmp)
        rows = [
            ("no skills", {"S=100": await _one(empty, 1.0, ops, rounds)}),
            ("100 skills, cached", {"S=100": await _one(full, 1.0, ops, rounds)}),
            ("100 skills, rechecked", {"S=100": await _one(full, 0.0, ops, rounds)}),
        ]
    print_table("assemble + render of one agent's prompt", ["S=100"], rows, "no skills", "us")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    anyio.run(_run, "--quick" in args)


if __name__ == "__main__":
    main()
