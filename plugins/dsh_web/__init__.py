"""The web seam: fetch providers, search providers, and the one each call goes to.

YAML name ``web``; service ``Web`` at ctx key ``web``. Implementations (``web-fetch``,
``web-searxng``) register providers; ``tool-web`` calls them. See this package's README.
"""

from __future__ import annotations

from ._errors import (
    WebBlockedUrlError,
    WebFetchError,
    WebFetchTooLargeError,
    WebInvalidUrlError,
    WebProviderAmbiguousError,
    WebProviderError,
    WebProviderUnavailableError,
    WebSearchError,
    WebTimeoutError,
    WebTooManyRedirectsError,
    WebUnsupportedContentTypeError,
)
from ._service import Web, WebConfig, WebSpecs
from ._types import FetchProvider, FetchResult, SearchHit, SearchProvider, SearchResult

plugin = Web

__all__ = [
    "FetchProvider",
    "FetchResult",
    "SearchHit",
    "SearchProvider",
    "SearchResult",
    "Web",
    "WebBlockedUrlError",
    "WebConfig",
    "WebFetchError",
    "WebFetchTooLargeError",
    "WebInvalidUrlError",
    "WebProviderAmbiguousError",
    "WebProviderError",
    "WebProviderUnavailableError",
    "WebSearchError",
    "WebSpecs",
    "WebTimeoutError",
    "WebTooManyRedirectsError",
    "WebUnsupportedContentTypeError",
    "plugin",
]
