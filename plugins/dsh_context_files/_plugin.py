"""The ``context-files`` plugin: the project's AGENTS.md / CLAUDE.md in the prompt."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dsh import Context, Disposer, Plugin
from dsh_system_prompt import AssembleContext, PromptSection

from ._files import FILE_NAMES, ContextFile, FileCache, folders, render

__all__ = ["SECTION", "SECTION_ORDER", "VARIABLE", "ContextFiles", "ContextFilesConfig"]

#: The section holding the project context, and its order (after the persona).
SECTION = "context:project"
SECTION_ORDER = 50
#: The variable whose value is the files' text (the section's text is ``{{project_context}}``).
VARIABLE = "project_context"


class ContextFilesConfig(BaseModel):
    """Config of the ``context-files`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: The farthest folder searched (included); None: the filesystem root. ``~`` is
    #: expanded; a relative path is taken from the process's current directory.
    root: str | None = None
    #: The most bytes of file text the section holds; the rest is cut with a marker.
    max_bytes: int = Field(default=65536, gt=0)

    @field_validator("root")
    @classmethod
    def _existing_folder(cls, root: str | None) -> str | None:
        if root is None:
            return None
        path = os.path.realpath(Path(root).expanduser())
        if not os.path.isdir(path):
            raise ValueError(f"root {root!r} is not a folder ({path})")
        return path


class ContextFiles(Plugin):
    """Registers the ``context:project`` section (order 50) and the
    ``project_context`` variable: the AGENTS.md and CLAUDE.md files from the calling
    agent's working directory up to ``root``, read again when they change."""

    name = "context-files"
    Config = ContextFilesConfig
    inject = ("system_prompt",)

    def __init__(self, ctx: Context, config: ContextFilesConfig) -> None:
        super().__init__(ctx, config)
        #: The files read so far (shared by every agent: keyed by path).
        self.cache = FileCache(config.max_bytes)

    def setup(self) -> Iterator[Disposer]:
        prompt = self.ctx.system_prompt
        yield prompt.section(
            PromptSection(name=SECTION, order=SECTION_ORDER, text="{{" + VARIABLE + "}}")
        )
        yield prompt.variable(VARIABLE, self.project_context)

    def files(self, cwd: str | None = None) -> list[ContextFile]:
        """The context files of ``cwd`` (default: the process's), farthest first."""
        found = []
        for folder in folders(cwd or os.getcwd(), self.config.root):
            for name in FILE_NAMES:
                file = self.cache.get(os.path.join(folder, name))
                if file is not None:
                    found.append(file)
        return found

    def project_context(self, context: AssembleContext) -> str:
        """The variable's value for one assembly: the files of the assembling agent's
        working directory (the process's without an agent, or for an agent without
        one), rendered; empty when there are none."""
        agent: Any = context.agent
        cwd: str | None = None if agent is None else agent.cwd
        return render(self.files(cwd), self.config.max_bytes)
