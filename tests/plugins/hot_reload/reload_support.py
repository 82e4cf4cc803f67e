"""Helpers of the hot-reload tests: a deployment directory with a tool file plugin
whose versions the tests write, and a root that loads it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from dsh import Context, Fiber, load_deployment
from dsh.testing import ScriptedModel, write_deployment
from dsh_hot_reload import HotReload, ReloadReport
from dsh_system_prompt import AssembleContext

#: A tool file plugin: ``probe`` with a description and an answer (format both in).
TOOL = """\
from pydantic import BaseModel
from dsh_tools import Tool

inject = ["tools"]


class Args(BaseModel):
    pass


async def run(args, call):
    return {answer!r}


def apply(ctx, config):
    return ctx.tools.register(
        Tool(name="probe", description={description!r}, parameters=Args, execute=run)
    )
"""

AGENT = """\
- {id: core, name: agent-core, config: {model: scripted, persona: You test.}}
- {id: tool, name: ./tool.py}
- {id: reload, name: hot-reload, config: {watch: false}}
"""


def tool_source(description: str = "Version one.", answer: str = "v1") -> str:
    return TOOL.format(description=description, answer=answer)


@dataclass
class Rig:
    root: Context
    deployment: Fiber
    directory: Path
    model: ScriptedModel
    reports: list[ReloadReport]

    @property
    def file(self) -> Path:
        return self.directory / "dsh.yml"

    @property
    def hot(self) -> HotReload:
        service: HotReload = self.root.hot_reload
        return service

    @property
    def fibers(self) -> dict[str, Fiber]:
        fibers: dict[str, Fiber] = self.deployment.instance.fibers
        return fibers

    def write(self, name: str, text: str) -> Path:
        path = self.directory / name
        path.write_text(text)
        return path

    async def reload(self, *names: str) -> ReloadReport:
        return await self.hot.reload([self.directory / name for name in names])


@asynccontextmanager
async def rig(
    directory: Path, yaml_text: str = AGENT, files: dict[str, str] | None = None
) -> AsyncIterator[Rig]:
    """Load ``yaml_text`` from ``directory`` (with ``tool.py`` and ``files``); the
    scripted model is installed when the deployment has an ``llm``."""
    (directory / "tool.py").write_text(tool_source())
    for name, text in (files or {}).items():
        (directory / name).write_text(text)
    path = write_deployment(directory, yaml_text)
    async with Context() as root:
        deployment = await load_deployment(path, root)
        model = ScriptedModel()
        if root.get("llm") is not None:
            model.install(root)
        reports: list[ReloadReport] = []
        root.on("hot-reload/done", reports.append)
        yield Rig(root, deployment, directory, model, reports)


async def next_report(root: Context) -> ReloadReport:
    """The report of the next reload that ends."""
    done = anyio.Event()
    got: list[ReloadReport] = []

    def seen(report: ReloadReport) -> None:
        got.append(report)
        done.set()

    listening = root.on("hot-reload/done", seen)
    try:
        await done.wait()
    finally:
        listening()
    return got[0]


def tool_of(request: Any, name: str = "probe") -> Any:
    """The schema of tool ``name`` in a model request."""
    return next(tool for tool in request.tools if tool.name == name)


async def tool_names(root: Context) -> set[str]:
    """The names of the tools the model would see (the global view)."""
    assembly = await root.system_prompt.assemble(AssembleContext())
    return {tool.name for tool in assembly.tools}


def fresh_module_name(path: Path) -> str:
    """The name in ``sys.modules`` of the module imported from ``path``."""
    return next(
        name
        for name, module in list(sys.modules.items())
        if getattr(module, "__file__", None) == str(path.resolve())
    )
