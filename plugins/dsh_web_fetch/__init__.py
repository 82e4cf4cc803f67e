"""Fetching web pages over HTTP, fenced off from this machine and its network.

YAML name ``web-fetch``; it injects ``web`` and registers the fetch provider ``http``.
See this package's README.
"""

from __future__ import annotations

from ._config import DEFAULT_MAX_BYTES, WebFetchConfig
from ._convert import Converter, load_converter
from ._fence import (
    METADATA_ADDRESSES,
    FencedBackend,
    FencedTransport,
    Resolver,
    is_blocked,
    literal_address,
    resolve_host,
)
from ._fetcher import ACCEPT, HttpFetcher
from ._plugin import WebFetch
from ._urls import MAX_URL_LENGTH, check_url

plugin = WebFetch

__all__ = [
    "ACCEPT",
    "DEFAULT_MAX_BYTES",
    "MAX_URL_LENGTH",
    "METADATA_ADDRESSES",
    "Converter",
    "FencedBackend",
    "FencedTransport",
    "HttpFetcher",
    "Resolver",
    "WebFetch",
    "WebFetchConfig",
    "check_url",
    "is_blocked",
    "literal_address",
    "load_converter",
    "plugin",
    "resolve_host",
]
