"""Errors of the web seam and of the providers behind it.

The provider errors live here, not in one provider's package, so every fetch or search
provider reports the same codes and a tool can tell them apart without knowing which
provider answered. A tool lets them propagate: ``dsh_tools`` turns each into an error
result ``Error: <message>`` carrying its ``code``.
"""

from __future__ import annotations

from dsh import DshError

__all__ = [
    "WebBlockedUrlError",
    "WebFetchError",
    "WebFetchTooLargeError",
    "WebInvalidUrlError",
    "WebProviderAmbiguousError",
    "WebProviderError",
    "WebProviderUnavailableError",
    "WebSearchError",
    "WebTimeoutError",
    "WebTooManyRedirectsError",
    "WebUnsupportedContentTypeError",
]


class WebProviderError(DshError, ValueError):
    """A provider registration was refused: not a provider, a blank id, or an id taken
    by another provider of the same kind."""

    code = "WEB_PROVIDER"


class WebProviderUnavailableError(DshError, LookupError):
    """No provider of the kind asked for can answer: none is registered, or the one the
    ``web`` config names is not."""

    code = "WEB_PROVIDER_UNAVAILABLE"


class WebProviderAmbiguousError(DshError, LookupError):
    """Several providers of one kind are registered and the ``web`` config names none."""

    code = "WEB_PROVIDER_AMBIGUOUS"


class WebInvalidUrlError(DshError, ValueError):
    """A URL that cannot be fetched: not http(s), no host, malformed or too long."""

    code = "WEB_INVALID_URL"


class WebBlockedUrlError(DshError, PermissionError):
    """A URL that may not be fetched: credentials in it, or a host that resolves to a
    loopback, private, link-local or metadata address."""

    code = "WEB_BLOCKED_URL"


class WebTooManyRedirectsError(DshError, RuntimeError):
    """A fetch was redirected more times than allowed (``max_redirects``, 5 by default)."""

    code = "WEB_TOO_MANY_REDIRECTS"


class WebFetchTooLargeError(DshError, ValueError):
    """A response declared a body larger than the fetch cap."""

    code = "WEB_FETCH_TOO_LARGE"


class WebUnsupportedContentTypeError(DshError, ValueError):
    """A response whose content type is not HTML/XHTML, ``text/*``, JSON or XML."""

    code = "WEB_UNSUPPORTED_CONTENT_TYPE"


class WebFetchError(DshError, RuntimeError):
    """A fetch failed on the way: the host did not resolve, the connection failed, or the
    server broke the protocol."""

    code = "WEB_FETCH_FAILED"


class WebTimeoutError(DshError, TimeoutError):
    """A fetch or a search took longer than its time limit."""

    code = "WEB_TIMEOUT"


class WebSearchError(DshError, RuntimeError):
    """A search provider failed: unreachable, a non-2xx answer, or a reply it cannot read."""

    code = "WEB_SEARCH_FAILED"
