"""The ``Web`` service: the fetch and search provider registries, and choosing one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints

from dsh import CheckReport, Context, Disposer, Service, hookspec
from dsh_agent import AgentSpecs

from ._errors import WebProviderAmbiguousError, WebProviderError, WebProviderUnavailableError
from ._types import FetchProvider, FetchResult, SearchProvider, SearchResult

__all__ = ["Web", "WebConfig", "WebSpecs"]

#: The two kinds of provider.
Kind = Literal["fetch", "search"]

ProviderT = TypeVar("ProviderT", FetchProvider, SearchProvider)

ProviderId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class WebConfig(BaseModel):
    """Config of the ``web`` plugin (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The id of the fetch provider to use; unset: the only one registered.
    fetch_provider: ProviderId | None = None
    #: The id of the search provider to use; unset: the only one registered.
    search_provider: ProviderId | None = None


class WebSpecs:
    """The events owned by the web service."""

    @hookspec
    def web_provider_added(self, kind: str, provider: Any) -> None:
        """A ``kind`` (``"fetch"`` or ``"search"``) provider was registered; a listener
        that raises undoes the registration."""

    @hookspec
    def web_provider_removed(self, kind: str, provider_id: str) -> None:
        """The ``kind`` provider ``provider_id`` was unregistered."""


class Web(Service):
    """Fetch and search providers, and the one each call goes to (ctx key ``web``).

    Providers register themselves with :meth:`register_fetch_provider` and
    :meth:`register_search_provider`; the registration belongs to the caller's fiber
    and is undone when it unloads. A configured provider id must be registered;
    without one, exactly one provider of the kind must be.
    """

    key = "web"
    name = "web"
    Config = WebConfig
    hookspecs = WebSpecs

    config: WebConfig

    def __init__(self, ctx: Context, config: WebConfig) -> None:
        super().__init__(ctx, config)
        self._fetchers: dict[str, FetchProvider] = {}
        self._searchers: dict[str, SearchProvider] = {}
        self._told = False

    def setup(self) -> Iterator[Disposer]:
        ctx = self.home_ctx
        yield ctx.on("deployment/check", self._check)
        # Declared by the agent registry too (idempotent): whichever loads first.
        ctx.events.add_hookspecs(AgentSpecs)
        yield ctx.on("agent/status", self._running)

    # -- names that point nowhere -------------------------------------------------------

    def unregistered(self) -> list[str]:
        """One line per configured provider id that is not registered, located at its
        config key: ``<file>:<line>: web fetch_provider "<id>" is not registered;
        known: <ids>``."""
        entry = self.home_ctx.fiber.entry
        lines = []
        for kind, registry in (("fetch", self._fetchers), ("search", self._searchers)):
            key = f"{kind}_provider"
            wanted = getattr(self.config, key)
            if wanted is None or wanted in registry:
                continue
            where = f"{entry.locate((key,))}: " if entry is not None else ""
            known = ", ".join(sorted(registry)) or "(none)"
            lines.append(f'{where}web {key} "{wanted}" is not registered; known: {known}')
        return lines

    def _check(self, report: CheckReport) -> None:
        for line in self.unregistered():
            report.fail(line)

    def _running(self, agent: Any, status: str) -> None:
        """The first turn of the run: say what ``dsh check`` says, once."""
        if status == "running" and not self._told:
            self._told = True
            for line in self.unregistered():
                self.home_ctx.logger.error("%s", line)

    # -- registration -------------------------------------------------------------------

    def register_fetch_provider(self, provider: FetchProvider) -> Disposer:
        """Offer ``provider`` for fetches; returns the exact disposer of the
        registration. Raises :class:`WebProviderError`, registering nothing, for an
        object without a non-blank ``id`` and a ``fetch`` method, or a taken id."""
        return self._register(self._fetchers, "fetch", provider)

    def register_search_provider(self, provider: SearchProvider) -> Disposer:
        """Offer ``provider`` for searches; returns the exact disposer of the
        registration. Raises :class:`WebProviderError`, registering nothing, for an
        object without a non-blank ``id`` and a ``search`` method, or a taken id."""
        return self._register(self._searchers, "search", provider)

    def _register(self, registry: dict[str, ProviderT], kind: str, provider: ProviderT) -> Disposer:
        checked: object = provider
        provider_id = getattr(checked, "id", None)
        if not isinstance(provider_id, str) or not provider_id.strip():
            raise WebProviderError(
                f"a web {kind} provider needs a non-blank string id, got {provider_id!r} "
                f"on {type(checked).__name__}"
            )
        if not callable(getattr(checked, kind, None)):
            raise WebProviderError(
                f'web {kind} provider "{provider_id}" has no {kind}() method '
                f"({type(checked).__name__})"
            )
        if provider_id in registry:
            raise WebProviderError(f'a web {kind} provider "{provider_id}" is already registered')
        home = self.home_ctx

        def body() -> Iterator[Callable[[], None]]:
            registry[provider_id] = provider

            def remove() -> None:
                del registry[provider_id]
                home.emit("web/provider-removed", kind, provider_id)

            yield remove
            home.emit("web/provider-added", kind, provider)

        return self.ctx.effect(body, label=f"web {kind} provider {provider_id}")

    # -- lookup -------------------------------------------------------------------------

    def fetch_providers(self) -> list[FetchProvider]:
        """The registered fetch providers, in registration order."""
        return list(self._fetchers.values())

    def search_providers(self) -> list[SearchProvider]:
        """The registered search providers, in registration order."""
        return list(self._searchers.values())

    def has_provider(self, kind: Kind) -> bool:
        """Whether a ``kind`` call has a provider to go to: the configured one is
        registered, or (none configured) any is."""
        registry: dict[str, Any] = self._fetchers if kind == "fetch" else self._searchers
        configured = getattr(self.config, f"{kind}_provider")
        return configured in registry if configured is not None else bool(registry)

    def fetch_provider(self) -> FetchProvider:
        """The fetch provider a fetch goes to (see :class:`Web`); raises
        :class:`WebProviderUnavailableError` or :class:`WebProviderAmbiguousError`."""
        return _choose(self._fetchers, "fetch", self.config.fetch_provider)

    def search_provider(self) -> SearchProvider:
        """The search provider a search goes to (see :class:`Web`); raises
        :class:`WebProviderUnavailableError` or :class:`WebProviderAmbiguousError`."""
        return _choose(self._searchers, "search", self.config.search_provider)

    # -- calls --------------------------------------------------------------------------

    async def fetch(self, url: str) -> FetchResult:
        """The page at ``url``, from the chosen fetch provider (its errors propagate)."""
        return await self.fetch_provider().fetch(url)

    async def search(self, query: str, max_results: int) -> SearchResult:
        """What the chosen search provider finds for ``query`` (its errors propagate)."""
        return await self.search_provider().search(query, max_results)


def _choose(registry: dict[str, ProviderT], kind: str, configured: str | None) -> ProviderT:
    listed = ", ".join(f'"{name}"' for name in registry) or "none"
    if configured is not None:
        provider = registry.get(configured)
        if provider is None:
            raise WebProviderUnavailableError(
                f'the web {kind} provider "{configured}" named by {kind}_provider in the web '
                f"config is not registered (registered: {listed})"
            )
        return provider
    if not registry:
        raise WebProviderUnavailableError(f"no web {kind} provider is registered")
    if len(registry) > 1:
        raise WebProviderAmbiguousError(
            f"{len(registry)} web {kind} providers are registered ({listed}); name the one "
            f"to use as {kind}_provider in the web config"
        )
    (provider,) = registry.values()
    return provider
