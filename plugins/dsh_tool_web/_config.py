"""The ``tool-web`` config: which tools exist and how much they return."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ToolWebConfig"]


class ToolWebConfig(BaseModel):
    """Config of the ``tool-web`` plugin (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Register ``web_fetch`` (and its guidance section).
    fetch: bool = True
    #: Register ``web_search`` (and its guidance section).
    search: bool = True
    #: The longest body ``web_fetch`` returns, in characters; a longer one is cut here
    #: and a note says so.
    fetch_max_output_chars: int = Field(default=200_000, gt=0)
    #: The most sources ``web_search`` lists per query.
    search_max_results: int = Field(default=8, gt=0)
