"""Config of the ``bash-local`` executor."""

from __future__ import annotations

import tempfile
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from dsh_fs import compile_glob
from dsh_fs_local import DEFAULT_DENY_READ

__all__ = ["DEFAULT_SCRUB", "LocalBashConfig", "SandboxMode", "default_writable_roots"]

#: How commands are confined: not at all, no writes, or writes in the writable roots.
SandboxMode = Literal["off", "read-only", "workspace-write"]

#: What marks a variable's name as a secret (compared in upper case): a part the name
#: contains, or a glob pattern (an entry with ``*``, ``?`` or ``[``) the whole name
#: matches. Such a variable is removed from a command's environment.
DEFAULT_SCRUB = (
    "API_KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE_KEY",
    "ACCESS_KEY",
    "DATABASE_URL",
    "*_PWD",
    "*_KEY",
    "NPM_*AUTH*",
)


def default_writable_roots() -> list[str]:
    """The session's working directory (``.``) and the platform temp dir."""
    return [".", tempfile.gettempdir()]


def _root(root: str) -> str:
    if not root.strip():
        raise ValueError("a writable root must name a directory, got an empty string")
    return root


def _deny_glob(pattern: str) -> str:
    # The form of fs-local's deny_read (ARCHITECTURE §6.3).
    if not pattern.startswith(("/", "~")):
        raise ValueError(f"deny_read pattern {pattern!r} must be absolute or start with ~")
    compile_glob(pattern)
    return pattern


class LocalBashConfig(BaseModel):
    """Config of ``bash-local``: limits, the kill grace, and the environment."""

    model_config = ConfigDict(extra="forbid")

    #: The timeout of a request that names none.
    default_timeout_ms: int = Field(default=120_000, gt=0)
    #: The longest timeout a request may ask for.
    max_timeout_ms: int = Field(default=600_000, gt=0)
    #: How much of each stream is kept in memory (the tail).
    max_output_bytes: int = Field(default=64_000, gt=0)
    #: How much of each stream its spill file may hold (0: no spill files).
    spill_max_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    #: Where the private spill folder is made (default: the platform temp dir).
    spill_dir: str | None = None
    #: From SIGTERM to SIGKILL when a command is stopped.
    kill_grace_ms: int = Field(default=3000, ge=0)
    #: Variables added to every command's environment (after scrubbing).
    env: dict[str, str] = Field(default_factory=dict)
    #: Name parts and glob patterns marking secrets to remove from the inherited
    #: environment.
    scrub_env: list[str] = Field(default_factory=lambda: list(DEFAULT_SCRUB))
    #: Remove, whatever its name, an inherited variable whose value holds a URL with a
    #: password (``scheme://user:password@``).
    scrub_url_passwords: bool = True
    #: The shell program, started as ``<shell> -c <command>``.
    shell: str = Field(default="bash", min_length=1)
    #: Run each command in the ``sandbox`` service's sandbox (``off``: unconfined).
    sandbox: SandboxMode = "off"
    #: Let sandboxed commands use the network.
    network: bool = False
    #: Where sandboxed commands may write in ``workspace-write``: absolute, ``~``, or
    #: relative to the calling session's working directory (``.`` is that directory).
    writable_roots: list[Annotated[str, AfterValidator(_root)]] = Field(
        default_factory=default_writable_roots
    )
    #: Globs (absolute or ``~``) of files sandboxed commands cannot read.
    deny_read: list[Annotated[str, AfterValidator(_deny_glob)]] = Field(
        default_factory=lambda: list(DEFAULT_DENY_READ)
    )

    @model_validator(mode="after")
    def _default_within_max(self) -> LocalBashConfig:
        if self.default_timeout_ms > self.max_timeout_ms:
            raise ValueError(
                f"default_timeout_ms ({self.default_timeout_ms}) is over max_timeout_ms "
                f"({self.max_timeout_ms})"
            )
        return self
