"""The ``llm-openai`` config: where the server is, which models it serves, how patient to be."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_BASE_URL", "OpenAICompatibleConfig"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAICompatibleConfig(BaseModel):
    """Config of the ``llm-openai`` plugin (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Sent as ``Authorization: Bearer <api_key>``; ``None`` sends no such header.
    api_key: str | None = Field(default=None, repr=False)
    #: The API root; requests go to ``<base_url>/chat/completions``.
    base_url: str = DEFAULT_BASE_URL
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
    #: Send reasoning back as ``reasoning_content`` on assistant messages (DeepSeek
    #: thinking mode requires it once a tool was called; most servers reject or ignore it).
    send_reasoning: bool = False
    #: Sampling knobs, each sent only when set (servers differ in what they accept).
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    #: Sent only when set, and only with tools. llama-cpp-python's server reads a missing
    #: one as "none" and refuses "auto" while streaming: leave it unset there.
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    #: Sent only when set, and only with tools.
    parallel_tool_calls: bool | None = None
    #: Merged into every request body last (server-specific fields such as
    #: ``{"top_k": 20}`` or ``{"chat_template_kwargs": {...}}``); it wins over the rest.
    extra_body: dict[str, Any] = {}

    def request_options(self, with_tools: bool) -> dict[str, Any]:
        """The optional body fields this config sets for a request (``with_tools``:
        the request offers tools)."""
        options: dict[str, Any] = {
            key: value
            for key in ("temperature", "top_p", "seed")
            if (value := getattr(self, key)) is not None
        }
        if with_tools:
            if self.tool_choice is not None:
                options["tool_choice"] = self.tool_choice
            if self.parallel_tool_calls is not None:
                options["parallel_tool_calls"] = self.parallel_tool_calls
        return options

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
