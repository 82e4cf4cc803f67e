"""The ``tool-web`` plugin: ``web_fetch`` and ``web_search`` over the ``web`` service."""

from __future__ import annotations

from collections.abc import Iterator

import anyio

from dsh import Disposer, Plugin
from dsh_system_prompt import PromptSection
from dsh_tools import Tool, ToolCall
from dsh_web import SearchResult

from ._config import ToolWebConfig
from ._fetch_tool import FETCH_DESCRIPTION, FETCH_GUIDANCE, WebFetchArgs, render_fetch
from ._search_tool import (
    SEARCH_DESCRIPTION,
    SEARCH_GUIDANCE,
    WebSearchArgs,
    normalise_queries,
    render_search,
)

__all__ = ["FETCH_SECTION", "SEARCH_SECTION", "ToolWeb"]

#: The guidance sections, in the tool band of the prompt.
SEARCH_SECTION = ("tool:web_search", 110)
FETCH_SECTION = ("tool:web_fetch", 111)


class ToolWeb(Plugin):
    """Registers the enabled web tools and their guidance; it injects ``tools``,
    ``system_prompt`` and ``web`` (whose providers answer the calls)."""

    name = "tool-web"
    Config = ToolWebConfig
    inject = ("tools", "system_prompt", "web")

    config: ToolWebConfig

    def setup(self) -> Iterator[Disposer]:
        config = self.config
        ctx = self.ctx
        if config.search:
            yield ctx.system_prompt.section(PromptSection(*SEARCH_SECTION, text=SEARCH_GUIDANCE))
            yield ctx.tools.register(
                Tool(
                    name="web_search",
                    description=SEARCH_DESCRIPTION,
                    parameters=WebSearchArgs,
                    execute=self.web_search,
                )
            )
        if config.fetch:
            yield ctx.system_prompt.section(PromptSection(*FETCH_SECTION, text=FETCH_GUIDANCE))
            yield ctx.tools.register(
                Tool(
                    name="web_fetch",
                    description=FETCH_DESCRIPTION,
                    parameters=WebFetchArgs,
                    execute=self.web_fetch,
                )
            )

    async def web_fetch(self, args: WebFetchArgs, call: ToolCall) -> str:
        """The ``web_fetch`` tool; the provider's errors become error results."""
        result = await self.ctx.web.fetch(args.url)
        return render_fetch(args.url, result, self.config.fetch_max_output_chars)

    async def web_search(self, args: WebSearchArgs, call: ToolCall) -> str:
        """The ``web_search`` tool: the queries run concurrently; the first failure (in
        query order) becomes the error result."""
        queries = normalise_queries(args.queries)
        provider = self.ctx.web.search_provider()
        limit = self.config.search_max_results
        outcomes: list[SearchResult | Exception] = [SearchResult()] * len(queries)

        async def run(index: int, query: str) -> None:
            try:
                outcomes[index] = await provider.search(query, limit)
            except Exception as exc:
                outcomes[index] = exc

        async with anyio.create_task_group() as group:
            for index, query in enumerate(queries):
                group.start_soon(run, index, query)
        answers: list[tuple[str, SearchResult]] = []
        for query, outcome in zip(queries, outcomes, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            answers.append((query, outcome))
        return render_search(answers, limit)
