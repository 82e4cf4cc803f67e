"""The ``llm-anthropic`` config: the shared HTTP keys, plus the Messages API's own."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dsh_llm.http import HttpModelConfig

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_VERSION", "AnthropicConfig", "ThinkingConfig"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_VERSION = "2023-06-01"

#: ``tool_choice`` as the other adapters spell it, in the Messages API's words.
_CHOICES = {"auto": "auto", "none": "none", "required": "any"}


class ThinkingConfig(BaseModel):
    """Extended thinking: Claude reasons in signed thinking blocks before it answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The most tokens Claude may think for (the API's minimum is 1024); counted
    #: within ``max_tokens``.
    budget_tokens: int = Field(ge=1024)


class AnthropicConfig(HttpModelConfig):
    """Config of the ``llm-anthropic`` plugin (unknown keys are errors).

    ``api_key`` is sent as ``x-api-key``; requests go to ``<base_url>/v1/messages``. The
    keys every HTTP adapter shares are ``dsh_llm.http.HttpModelConfig``'s.
    """

    base_url: str = DEFAULT_BASE_URL
    #: Claude's temperatures run from 0 to 1.
    temperature: float | None = Field(default=None, ge=0, le=1)
    #: Sent as ``max_tokens`` when the request sets none (the API requires one).
    max_tokens: int = Field(default=8192, gt=0)
    #: The ``anthropic-version`` header.
    anthropic_version: str = Field(default=DEFAULT_VERSION, min_length=1)
    #: Extended thinking; off when unset.
    thinking: ThinkingConfig | None = None
    #: Sent only with tools, as the API's ``{type: …}`` (a dict is sent as given).
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None

    def request_options(self, with_tools: bool) -> dict[str, Any]:
        """The optional body fields this config sets for a request (``with_tools``:
        the request offers tools): the sampling knobs, and ``tool_choice`` (from
        ``tool_choice`` and ``parallel_tool_calls``) only with tools."""
        options = self.sampling()
        choice = self.tool_choice
        if not with_tools or (choice is None and self.parallel_tool_calls is None):
            return options
        if isinstance(choice, dict):
            options["tool_choice"] = choice  # the API's own form, as given
            return options
        mapped: dict[str, Any] = {"type": _CHOICES[choice or "auto"]}
        if self.parallel_tool_calls is not None and mapped["type"] != "none":
            mapped["disable_parallel_tool_use"] = not self.parallel_tool_calls
        options["tool_choice"] = mapped
        return options

    @model_validator(mode="after")
    def _thinking_fits(self) -> AnthropicConfig:
        # What the API refuses with thinking on, refused here with the key's name.
        if self.thinking is None:
            return self
        budget = self.thinking.budget_tokens
        if budget >= self.max_tokens:
            raise ValueError(
                f"thinking.budget_tokens ({budget}) must be less than max_tokens "
                f"({self.max_tokens})"
            )
        if self.temperature is not None:
            raise ValueError("temperature cannot be set with thinking (the API refuses it)")
        if self.top_p is not None and self.top_p < 0.95:
            raise ValueError(f"top_p must be at least 0.95 with thinking, got {self.top_p}")
        choice = self.tool_choice
        forced = choice.get("type") if isinstance(choice, dict) else _CHOICES.get(choice or "")
        if forced in ("any", "tool"):
            raise ValueError(
                f"tool_choice {choice!r} forces a tool call, which thinking does not allow"
            )
        return self
