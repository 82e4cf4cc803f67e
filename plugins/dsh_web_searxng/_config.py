"""The ``web-searxng`` config: where the SearXNG instance is and how to ask it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["SearxngConfig"]


class SearxngConfig(BaseModel):
    """Config of the ``web-searxng`` plugin (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The instance's root URL; searches go to ``<base_url>/search``. A deployer's
    #: choice, so it may be a private address: ``web-fetch``'s fence does not apply.
    base_url: str
    #: The provider id (what ``web``'s ``search_provider`` names).
    id: str = Field(default="searxng", min_length=1)
    #: Seconds for one search.
    timeout_seconds: float = Field(default=30.0, gt=0)
    #: Extra query parameters sent with every search (``language``, ``categories``,
    #: ``engines``, ``safesearch``, ``time_range``, …).
    params: dict[str, str] = {}
    #: Extra HTTP headers sent with every search (an instance behind a proxy may want
    #: an authorisation header).
    headers: dict[str, str] = Field(default_factory=dict, repr=False)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {value!r}")
        return value.rstrip("/")

    @field_validator("params")
    @classmethod
    def _own_params(cls, value: dict[str, str]) -> dict[str, str]:
        taken = sorted(set(value) & {"q", "format"})
        if taken:
            raise ValueError(f"params may not set {', '.join(taken)}: the provider sends them")
        return value
