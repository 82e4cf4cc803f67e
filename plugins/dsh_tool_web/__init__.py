"""The model's web tools: ``web_fetch`` and ``web_search``, with their guidance.

YAML name ``tool-web``; it injects ``tools``, ``system_prompt`` and ``web``. See this
package's README.
"""

from __future__ import annotations

from ._config import ToolWebConfig
from ._fetch_tool import (
    FETCH_DESCRIPTION,
    FETCH_GUIDANCE,
    TRUNCATED_NOTE,
    WebFetchArgs,
    render_fetch,
)
from ._plugin import FETCH_SECTION, NOT_OFFERED, SEARCH_SECTION, ToolWeb
from ._search_tool import (
    CITE_NOTE,
    MAX_QUERIES,
    NO_RESULTS,
    SEARCH_DESCRIPTION,
    SEARCH_GUIDANCE,
    WebSearchArgs,
    normalise_queries,
    render_search,
)

plugin = ToolWeb

__all__ = [
    "CITE_NOTE",
    "FETCH_DESCRIPTION",
    "FETCH_GUIDANCE",
    "FETCH_SECTION",
    "MAX_QUERIES",
    "NOT_OFFERED",
    "NO_RESULTS",
    "SEARCH_DESCRIPTION",
    "SEARCH_GUIDANCE",
    "SEARCH_SECTION",
    "TRUNCATED_NOTE",
    "ToolWeb",
    "ToolWebConfig",
    "WebFetchArgs",
    "WebSearchArgs",
    "normalise_queries",
    "plugin",
    "render_fetch",
    "render_search",
]
