"""The ``tool-web`` plugin: ``web_fetch`` and ``web_search`` over the ``web`` service."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import anyio

from dsh import CheckReport, Context, Disposer, InactiveContextError, Plugin
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

__all__ = ["FETCH_SECTION", "NOT_OFFERED", "SEARCH_SECTION", "ToolWeb"]

#: The guidance sections, in the tool band of the prompt.
SEARCH_SECTION = ("tool:web_search", 110)
FETCH_SECTION = ("tool:web_fetch", 111)


#: Why ``web_search`` is not offered, after the location of ``search`` in the config.
NOT_OFFERED = (
    "tool-web offers no web_search: the web service has no search provider to use "
    "(load one, such as web-searxng, or set search: false)"
)


class ToolWeb(Plugin):
    """Registers the enabled web tools and their guidance; it injects ``tools``,
    ``system_prompt`` and ``web`` (whose providers answer the calls). ``web_search``
    is offered only while the web service has a search provider to use: it follows
    ``web/provider-added`` and ``web/provider-removed``."""

    name = "tool-web"
    Config = ToolWebConfig
    inject = ("tools", "system_prompt", "web")

    config: ToolWebConfig

    def __init__(self, ctx: Context, config: ToolWebConfig) -> None:
        super().__init__(ctx, config)
        self._search: Disposer | None = None

    def setup(self) -> Iterator[Callable[[], object]]:
        config = self.config
        ctx = self.ctx
        if config.search:
            # Subscribe first, then look: a provider registered in between is not missed.
            yield ctx.on("web/provider-added", self._follow)
            yield ctx.on("web/provider-removed", self._follow)
            yield ctx.on("deployment/check", self._check)
            yield self._unmount_search
            self._follow("search")
        if config.fetch:
            yield from self._offer(
                FETCH_SECTION,
                FETCH_GUIDANCE,
                Tool(
                    name="web_fetch",
                    description=FETCH_DESCRIPTION,
                    parameters=WebFetchArgs,
                    execute=self.web_fetch,
                ),
            )

    def _offer(
        self, section: tuple[str, int], guidance: str, tool: Tool[Any]
    ) -> Iterator[Disposer]:
        """A tool and its guidance section."""
        yield self.ctx.system_prompt.section(PromptSection(*section, text=guidance))
        yield self.ctx.tools.register(tool)

    # -- following the search providers -----------------------------------------------

    def _follow(self, kind: str, provider: Any = None) -> None:
        if kind != "search":
            return
        if not self.ctx.web.has_provider("search"):
            self._unmount_search()
        elif self._search is None:
            with contextlib.suppress(InactiveContextError):  # unloading: mount nothing
                self._mount_search()

    def _mount_search(self) -> None:
        ctx = self.ctx

        def body() -> Iterator[Disposer]:
            return self._offer(
                SEARCH_SECTION,
                SEARCH_GUIDANCE,
                Tool(
                    name="web_search",
                    description=SEARCH_DESCRIPTION,
                    parameters=WebSearchArgs,
                    execute=self.web_search,
                ),
            )

        self._search = ctx.effect(body, label="web_search")

    def _unmount_search(self) -> None:
        mounted, self._search = self._search, None
        if mounted is not None:
            mounted()

    def _check(self, report: CheckReport) -> None:
        if self._search is None:
            entry = self.ctx.fiber.entry
            where = f"{entry.locate(('search',))}: " if entry is not None else ""
            report.warn(f"{where}{NOT_OFFERED}")

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
