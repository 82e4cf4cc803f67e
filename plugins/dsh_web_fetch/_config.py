"""The ``web-fetch`` config: the provider id, the address fence and the limits."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_MAX_BYTES", "WebFetchConfig"]

#: The body cap: 5 MiB.
DEFAULT_MAX_BYTES = 5 * 1024 * 1024


class WebFetchConfig(BaseModel):
    """Config of the ``web-fetch`` plugin (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The provider id (what ``web``'s ``fetch_provider`` names).
    id: str = Field(default="http", min_length=1)
    #: Let fetches reach loopback, private, link-local and metadata addresses. Off by
    #: default: the model chooses the URLs, and those addresses are this machine's and
    #: its network's, not the web.
    allow_private: bool = False
    #: The largest body read, in bytes: a larger declared ``Content-Length`` is refused,
    #: a longer streamed body is cut here.
    max_bytes: int = Field(default=DEFAULT_MAX_BYTES, gt=0)
    #: Seconds for a whole fetch, redirects and reading included.
    timeout_seconds: float = Field(default=30.0, gt=0)
    #: Redirects followed before the fetch fails with ``WEB_TOO_MANY_REDIRECTS``.
    max_redirects: int = Field(default=5, ge=0)
    #: The ``User-Agent`` header sent with every request.
    user_agent: str = Field(default="dsh-web-fetch/0.1 (+https://pypi.org/project/dsh-harness/)")
