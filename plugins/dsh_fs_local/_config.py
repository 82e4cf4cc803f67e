"""Config of the ``fs-local`` plugin."""

from __future__ import annotations

import os
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from dsh_fs import compile_glob

__all__ = ["DEFAULT_DENY_READ", "FsLocalConfig", "Mode"]

#: What the backend lets the model change: nothing, the workspace (and the platform
#: temp dir), or everything.
Mode = Literal["read-only", "workspace-write", "full-access"]

#: Files never read by default: keys and credentials.
DEFAULT_DENY_READ = ("~/.ssh/**", "~/.aws/**", "~/.gnupg/**")


def _deny_glob(pattern: str) -> str:
    if not pattern.startswith(("/", "~")):
        raise ValueError(f"deny_read pattern {pattern!r} must be absolute or start with ~")
    compile_glob(pattern)
    return pattern


def _root(root: str | None) -> str | None:
    if root is not None and not os.path.isdir(os.path.expanduser(root)):
        raise ValueError(f"root {root!r} is not a directory")
    return root


class FsLocalConfig(BaseModel):
    """Config of the ``fs-local`` plugin (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    #: The workspace of ``workspace-write``; ``None``: the calling agent's session cwd
    #: (else the process cwd). A relative root is relative to the process cwd.
    root: Annotated[str | None, AfterValidator(_root)] = None
    mode: Mode = "workspace-write"
    #: Globs of canonical absolute paths (``~`` expanded) that are never read.
    deny_read: list[Annotated[str, AfterValidator(_deny_glob)]] = Field(
        default_factory=lambda: list(DEFAULT_DENY_READ)
    )
