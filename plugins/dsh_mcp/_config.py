"""Config of the ``mcp`` plugin: the servers to start and how calls and reconnects go."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["McpConfig", "McpServerConfig"]

_STDIO_ONLY = ("args", "env", "cwd")


class McpServerConfig(BaseModel):
    """One server: a command to run (stdio) or a URL to reach (streamable HTTP)."""

    model_config = ConfigDict(extra="forbid")

    #: The program of a stdio server (looked up on ``PATH`` when it has no slash).
    command: str | None = Field(default=None, min_length=1)
    #: Its arguments.
    args: list[str] = Field(default_factory=list)
    #: Variables added to the ``mcp`` package's default environment (``HOME``,
    #: ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``), not to all of ``os.environ``.
    env: dict[str, str] = Field(default_factory=dict)
    #: Its working directory; a relative one is relative to the deployment file.
    cwd: str | None = Field(default=None, min_length=1)
    #: The endpoint of a streamable HTTP server (``http://`` or ``https://``).
    url: str | None = None
    #: Headers sent with every request to a URL server (an ``Authorization`` token).
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("a server `url` starts with http:// or https://")
        return url

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if self.command is None and self.url is None:
            raise ValueError(
                "a server needs `command` (a stdio server) or `url` (a streamable HTTP server)"
            )
        if self.command is not None and self.url is not None:
            raise ValueError("a server has `command` (stdio) or `url` (HTTP), not both")
        if self.url is not None:
            wrong = [key for key in _STDIO_ONLY if key in self.model_fields_set]
            if wrong:
                keys = ", ".join(f"`{key}`" for key in wrong)
                raise ValueError(f"{keys} apply to a `command` server only, not to a `url` one")
        elif "headers" in self.model_fields_set:
            raise ValueError("`headers` apply to a `url` server only, not to a `command` one")
        return self


class McpConfig(BaseModel):
    """Config of the ``mcp`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: The servers by name; the name is part of every tool name (``mcp__<name>__<tool>``).
    servers: dict[Annotated[str, Field(min_length=1)], McpServerConfig] = Field(
        default_factory=dict
    )
    #: How long one tool call may take, waiting for a reconnect included.
    tool_call_timeout_ms: int = Field(default=60_000, gt=0)
    #: How long a server may take to start and list its tools.
    startup_timeout_ms: int = Field(default=30_000, gt=0)
    #: Fail the plugin when a server does not start, instead of warning and going on.
    fail_on_startup_error: bool = False
    #: The wait before the first reconnect after a server is lost; it doubles after each
    #: failed attempt, up to ``reconnect_max_ms``.
    reconnect_initial_ms: int = Field(default=500, gt=0)
    #: The longest wait between two reconnect attempts.
    reconnect_max_ms: int = Field(default=30_000, gt=0)

    @model_validator(mode="after")
    def _backoff_grows(self) -> Self:
        if self.reconnect_initial_ms > self.reconnect_max_ms:
            raise ValueError(
                f"reconnect_initial_ms ({self.reconnect_initial_ms}) is longer than "
                f"reconnect_max_ms ({self.reconnect_max_ms})"
            )
        return self
