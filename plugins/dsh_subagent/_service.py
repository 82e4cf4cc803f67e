"""The ``Subagents`` service: providers by name, and the runs they start."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, DshError, DuplicateNameError, Fiber, Service, hookspec

from ._types import (
    CAPABILITIES,
    StopReason,
    SubagentOutcome,
    SubagentProvider,
    SubagentRequest,
    SubagentResult,
    SubagentRun,
)

__all__ = [
    "DuplicateProviderError",
    "NoProviderError",
    "SubagentArgumentError",
    "SubagentDepthError",
    "SubagentError",
    "SubagentSpecs",
    "Subagents",
    "SubagentsConfig",
    "UnsupportedCapabilityError",
    "delegation_depth",
    "stop_reason_of",
]

_log = logging.getLogger("dsh.subagent")


class SubagentError(DshError, RuntimeError):
    """A subagent could not be started as asked."""

    code = "SUBAGENT"


class NoProviderError(SubagentError, LookupError):
    """No provider of that name is registered."""

    code = "NO_PROVIDER"


class DuplicateProviderError(SubagentError, DuplicateNameError):
    """A provider name is taken (``holder`` registered it)."""

    code = "DUPLICATE_PROVIDER"


class UnsupportedCapabilityError(SubagentError):
    """The request asks for something its provider cannot do (a persona, a tool
    filter, a depth limit)."""

    code = "UNSUPPORTED_CAPABILITY"


class SubagentDepthError(SubagentError):
    """Starting the child would nest delegation deeper than ``max_depth``."""

    code = "SUBAGENT_DEPTH"


class SubagentArgumentError(DshError, ValueError):
    """A request or a provider is malformed: an empty prompt, a provider without a name
    or ``start``, capabilities outside the known ones, a run that is not a run."""

    code = "INVALID_ARGS"


class SubagentSpecs:
    """The events owned by the subagent registry."""

    @hookspec
    def subagent_provider_added(self, provider: SubagentProvider) -> None:
        """A provider was registered. A listener that raises rolls the registration
        back and its error reaches whoever registered it."""

    @hookspec
    def subagent_provider_removed(self, name: str) -> None:
        """A provider was removed (its listeners' errors are logged)."""

    @hookspec
    def subagent_start(self, run: SubagentRun) -> None:
        """A run started (dispatched in the parent's scope)."""

    @hookspec
    def subagent_end(self, run: SubagentRun, result: SubagentResult) -> None:
        """A run settled, once (dispatched in the parent's scope)."""


class SubagentsConfig(BaseModel):
    """Config of the ``subagent`` plugin: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


#: Which request field each capability serves.
_NEEDS = (("persona", "persona"), ("tool_filter", "tool_filter"), ("max_depth", "depth_limit"))

#: The keys a request's ``tool_filter`` may have (the arguments of ``tools.restrict``).
_FILTER_KEYS = frozenset({"allow", "deny"})

#: The stop reason of a child whose turn ended with this kind.
_STOPS: dict[str, StopReason] = {
    "completed": "completed",
    "max-tokens": "max-tokens",
    "aborted": "aborted",
    "interrupted": "aborted",
    "blocked": "refusal",
}


def stop_reason_of(reason: Mapping[str, Any] | None) -> StopReason:
    """The stop reason of a run whose child's turn ended with ``reason`` (``None``:
    the turn never ended, the child was disposed first: ``aborted``)."""
    if reason is None:
        return "aborted"
    return _STOPS.get(str(reason.get("kind")), "error")


def delegation_depth(agent: Any) -> int:
    """How deep ``agent`` is in a delegation chain (0 for an agent nobody started)."""
    depth = agent.session.header.meta.get("delegation_depth", 0)
    return depth if isinstance(depth, int) else 0


class Subagents(Service):
    """Subagent providers by name, and starting runs on them (ctx key ``subagents``)."""

    key = "subagents"
    name = "subagent"
    Config = SubagentsConfig
    hookspecs = SubagentSpecs

    def __init__(self, ctx: Context, config: SubagentsConfig) -> None:
        super().__init__(ctx, config)
        self._providers: dict[str, tuple[SubagentProvider, Fiber]] = {}

    # -- providers ----------------------------------------------------------------------

    def register_provider(self, provider: SubagentProvider) -> Disposer:
        """Make ``provider`` available by its name while the caller lives; returns the
        exact disposer. Emits ``subagent/provider-added`` (a listener that raises rolls
        the registration back and its error reaches the caller) and, on removal,
        ``subagent/provider-removed``. A taken name raises
        :class:`DuplicateProviderError`; a malformed provider
        :class:`SubagentArgumentError`."""
        name = _check_provider(provider)
        taken = self._providers.get(name)
        claimant = self.ctx.fiber
        if taken is not None:
            raise DuplicateProviderError(
                f'subagent provider "{name}" is already registered by {taken[1].describe()}',
                kind="subagent provider",
                name=name,
                holder=taken[1],
                claimant=claimant,
            )

        def body() -> Iterator[Callable[[], None]]:
            self._providers[name] = (provider, claimant)
            yield functools.partial(self._remove, name)
            self.home_ctx.emit("subagent/provider-added", provider)

        return self.ctx.effect(body, label=f"subagent provider {name}")

    def _remove(self, name: str) -> None:
        del self._providers[name]
        try:
            self.home_ctx.emit("subagent/provider-removed", name)
        except Exception as exc:
            _log.error("a listener of subagent/provider-removed failed for %r", name, exc_info=exc)

    def get_provider(self, name: str) -> SubagentProvider | None:
        """The provider called ``name``, or None."""
        entry = self._providers.get(name)
        return None if entry is None else entry[0]

    def list(self) -> list[SubagentProvider]:
        """The providers in registration order."""
        return [provider for provider, _ in self._providers.values()]

    # -- runs ---------------------------------------------------------------------------

    async def start(self, name: str, request: SubagentRequest) -> SubagentRun:
        """Start a child with provider ``name`` for ``request``.

        Raises, before anything starts: :class:`NoProviderError`,
        :class:`UnsupportedCapabilityError` (``subagent provider "<p>" does not support
        the "<cap>" capability``), :class:`SubagentDepthError` (``subagent depth D
        exceeds maxDepth M``), :class:`SubagentArgumentError` for an empty prompt.
        Emits ``subagent/start`` now and ``subagent/end`` once the run settles, both in
        the parent's scope. ``await run.result`` never raises for the child's failure.
        """
        provider = self.get_provider(name)
        if provider is None:
            known = ", ".join(f'"{n}"' for n in self._providers) or "(none)"
            raise NoProviderError(f'no subagent provider "{name}"; registered: {known}')
        _check_request(provider, request)
        started: object = provider.start(request)
        run: object = await started if inspect.isawaitable(started) else started
        if not isinstance(run, SubagentRun) or not isinstance(run.result, SubagentOutcome):
            raise SubagentArgumentError(
                f'subagent provider "{name}" returned {run!r}, not a SubagentRun whose '
                "result is a SubagentOutcome"
            )
        run.provider = name
        parent = request.parent
        self._dispatch("subagent/start", run, scope=parent)
        run.result.add_callback(
            lambda result: self._dispatch("subagent/end", run, result, scope=parent)
        )
        return run

    def _dispatch(self, event: str, *args: Any, scope: object) -> None:
        # Observers never break a run: their failures are logged.
        try:
            self.home_ctx.emit(event, *args, scope=scope)
        except Exception as exc:
            _log.error("a listener of %s failed", event, exc_info=exc)


def _check_provider(provider: object) -> str:
    name = getattr(provider, "name", None)
    if not isinstance(name, str) or not name:
        raise SubagentArgumentError(
            f"a subagent provider needs a non-empty string name, got {name!r}"
        )
    capabilities = getattr(provider, "capabilities", None)
    if not isinstance(capabilities, frozenset) or not capabilities <= CAPABILITIES:
        raise SubagentArgumentError(
            f'subagent provider "{name}": capabilities must be a frozenset of '
            f"{', '.join(sorted(CAPABILITIES))}; got {capabilities!r}"
        )
    if not isinstance(getattr(provider, "inherits_parent_context", None), bool):
        raise SubagentArgumentError(
            f'subagent provider "{name}": inherits_parent_context must be a bool'
        )
    if not callable(getattr(provider, "start", None)):
        raise SubagentArgumentError(f'subagent provider "{name}" has no start(request)')
    return name


def _check_request(provider: SubagentProvider, request: object) -> None:
    if not isinstance(request, SubagentRequest):
        raise SubagentArgumentError(f"expected a SubagentRequest, got {type(request).__name__}")
    prompt: object = request.prompt
    if not isinstance(prompt, str) or not prompt.strip():
        raise SubagentArgumentError("invalid prompt: expected a non-empty string")
    for field, capability in _NEEDS:
        if getattr(request, field) is not None and capability not in provider.capabilities:
            raise UnsupportedCapabilityError(
                f'subagent provider "{provider.name}" does not support the '
                f'"{capability}" capability'
            )
    tool_filter: object = request.tool_filter
    if tool_filter is not None and (
        not isinstance(tool_filter, Mapping) or not set(tool_filter) <= _FILTER_KEYS
    ):
        raise SubagentArgumentError(
            f"invalid tool_filter {tool_filter!r}: expected a mapping with the keys "
            '"allow" and/or "deny"'
        )
    max_depth: object = request.max_depth
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0
    ):
        raise SubagentArgumentError(
            f"invalid max_depth {max_depth!r}: expected a non-negative integer"
        )
    if request.max_depth is not None:
        depth = delegation_depth(request.parent) + 1
        if depth > request.max_depth:
            raise SubagentDepthError(f"subagent depth {depth} exceeds maxDepth {request.max_depth}")
