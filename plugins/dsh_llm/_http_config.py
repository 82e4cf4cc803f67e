"""The config keys every HTTP model adapter shares (``dsh_llm.http.HttpModelConfig``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["HttpModelConfig"]


class HttpModelConfig(BaseModel):
    """The keys every HTTP model adapter takes (unknown keys are errors); a provider's
    config subclasses it, gives ``base_url`` its default and adds its own keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The provider's credential; ``None`` sends none.
    api_key: str | None = Field(default=None, repr=False)
    #: The API root (the provider's config gives the default).
    base_url: str
    #: The model names this adapter serves (an agent's ``model`` selects it).
    models: list[str] = Field(min_length=1)
    #: Seconds to establish a connection.
    connect_timeout: float = Field(default=10.0, gt=0)
    #: Seconds without a byte from the server (before the headers and between deltas).
    read_timeout: float = Field(default=120.0, gt=0)
    #: Extra attempts after a 429, a 5xx or a connection failure before the stream starts.
    max_retries: int = Field(default=2, ge=0)
    #: Seconds before the first retry; doubles on each further one.
    retry_backoff: float = Field(default=0.5, ge=0)
    #: The longest wait a server's ``Retry-After`` can impose before a retry, in seconds.
    max_retry_after: float = Field(default=60.0, ge=0)
    #: Extra HTTP headers on every request (they override the defaults).
    headers: dict[str, str] = {}
    #: Sampling knobs, each sent only when set (servers differ in what they accept).
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    #: Sent only when set, and only with tools.
    parallel_tool_calls: bool | None = None
    #: Merged into every request body last (server-specific fields); it wins over the rest.
    extra_body: dict[str, Any] = {}
    #: The context window (tokens) of each model, by name; wins over the rest.
    context_windows: dict[str, Annotated[int, Field(gt=0)]] = {}
    #: The context window of the served models ``context_windows`` does not name
    #: (``""``, an unset ``!env [NAME, ""]``, leaves it unset).
    context_window: int | None = Field(default=None, gt=0)

    def sampling(self) -> dict[str, Any]:
        """The sampling fields this config sets (``temperature``, ``top_p``)."""
        return {
            key: value
            for key in ("temperature", "top_p")
            if (value := getattr(self, key)) is not None
        }

    @field_validator("context_window", mode="before")
    @classmethod
    def _unset_window(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("api_key")
    @classmethod
    def _key_not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError(
                "api_key is empty (is the environment variable behind `!env` set?); "
                "omit api_key for a server that needs none"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {value!r}")
        return value.rstrip("/")

    @field_validator("models")
    @classmethod
    def _model_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name:
                raise ValueError("model names must be non-empty")
        if len(set(value)) != len(value):
            raise ValueError(f"model names repeat: {value}")
        return value
