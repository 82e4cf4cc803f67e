"""Config of the ``bash-local`` executor."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_SCRUB", "LocalBashConfig"]

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

    @model_validator(mode="after")
    def _default_within_max(self) -> LocalBashConfig:
        if self.default_timeout_ms > self.max_timeout_ms:
            raise ValueError(
                f"default_timeout_ms ({self.default_timeout_ms}) is over max_timeout_ms "
                f"({self.max_timeout_ms})"
            )
        return self
