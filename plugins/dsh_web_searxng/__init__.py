"""Web search through a SearXNG instance's JSON API.

YAML name ``web-searxng``; it injects ``web`` and registers the search provider
``searxng``. See this package's README.
"""

from __future__ import annotations

from ._config import SearxngConfig
from ._plugin import SearxngSearch
from ._provider import SearxngProvider, parse_reply

plugin = SearxngSearch

__all__ = ["SearxngConfig", "SearxngProvider", "SearxngSearch", "parse_reply", "plugin"]
