"""The ``SystemPrompt`` service: sections, tool providers and variables, in layers."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, Fiber, Service, hookspec, validate_config

from ._cache import CachedAssembly, ToolMemo, View
from ._errors import (
    DuplicatePromptNameError,
    PromptRegistrationError,
    PromptTypeError,
    SectionOrderError,
)
from ._tool_order import check_tool_order, order_tools
from ._types import (
    VARIABLE_NAME,
    AssembleContext,
    PromptAssembly,
    PromptSection,
    ToolProvider,
    ToolSchema,
    VariableProvider,
)
from ._views import check_prompts

__all__ = ["HARNESS_IDENTITY", "SystemPrompt", "SystemPromptConfig", "SystemPromptSpecs"]

#: The text of the built-in ``harness:identity`` section.
HARNESS_IDENTITY = "You are an AI agent powered by dsh."


class SystemPromptSpecs:
    """The events owned by the system prompt."""

    @hookspec
    def system_prompt_assemble(
        self, assembly: PromptAssembly, context: AssembleContext, call_next: Any
    ) -> PromptAssembly:
        """Waterfall over each assembly (scope-filtered); return the assembly to use."""
        raise NotImplementedError

    @hookspec
    def system_prompt_change(self) -> None:
        """A section, tool provider or variable was registered or removed."""


class SystemPromptConfig(BaseModel):
    """Config of the ``system-prompt`` plugin."""

    model_config = ConfigDict(extra="forbid")

    persona: str = ""
    tool_order: list[str] | None = None


@dataclass
class _Layer:
    sections: dict[str, PromptSection] = field(default_factory=dict)
    variables: dict[str, VariableProvider] = field(default_factory=dict)
    tools: dict[object, ToolProvider] = field(default_factory=dict)
    #: The fiber that registered each named entry, by (store, name).
    owners: dict[tuple[str, object], Fiber] = field(default_factory=dict)
    #: When this layer last changed (the service's change counter).
    version: int = 0
    #: The view of this scope's assemblies (the global layer's: of every scope without
    #: a layer), valid while its stamp matches.
    view: View | None = None

    def empty(self) -> bool:
        return not (self.sections or self.variables or self.tools)


class SystemPrompt(Service):
    """Assembles the system prompt from layered contributions (ctx key ``system_prompt``)."""

    key = "system_prompt"
    name = "system-prompt"
    Config = SystemPromptConfig
    hookspecs = SystemPromptSpecs

    def __init__(self, ctx: Context, config: SystemPromptConfig | dict[str, Any] | None) -> None:
        if not isinstance(config, SystemPromptConfig):
            validated: SystemPromptConfig = validate_config(
                SystemPromptConfig, config, "system-prompt", None
            )
            config = validated
        if config.tool_order is not None:
            check_tool_order(config.tool_order)
        ctx.events.add_hookspecs(SystemPromptSpecs)
        #: Looked up once: an assembly nobody filters skips the waterfall.
        self._assemble_event = ctx.events.event("system-prompt/assemble")
        self._global = _Layer()
        self._scoped: dict[int, tuple[object, _Layer]] = {}
        #: Counts registrations and removals: a layer's version is the count at its
        #: last change, so a view built before a change never matches after it.
        self._changes = 0
        self._tool_order = config.tool_order
        super().__init__(ctx, config)
        self.section(PromptSection(name="harness:identity", order=-100, text=HARNESS_IDENTITY))
        self.section(PromptSection(name="deployment:persona", order=0, text=config.persona))

    def setup(self) -> Disposer:
        # `dsh check` asks every plugin what it can verify; this one renders the views.
        home = self.home_ctx
        return home.on("deployment/check", functools.partial(check_prompts, home))

    # -- registration -------------------------------------------------------------------

    def _peek(self, scope: object) -> _Layer | None:
        """The layer of ``scope`` if it exists (never creates one)."""
        if scope is None:
            return self._global
        entry = self._scoped.get(id(scope))
        return None if entry is None else entry[1]

    def _layer(self, scope: object) -> _Layer:
        """The layer of ``scope``, created on first use."""
        layer = self._peek(scope)
        if layer is None:
            layer = _Layer()
            self._scoped[id(scope)] = (scope, layer)
        return layer

    def _changed(self) -> None:
        self.home_ctx.emit("system-prompt/change")

    def _touch(self, layer: _Layer) -> None:
        """Mark ``layer`` changed: the views built from it are rebuilt on next use."""
        self._changes += 1
        layer.version = self._changes

    def _register(
        self, ctx: Context, kind: str, key: object, value: object, label: str
    ) -> Disposer:
        scope = ctx.scope

        def body() -> Iterator[Callable[[], None]]:
            # The layer is created only once the effect exists: a registration refused
            # by the context (a disposed scope) leaves no empty layer behind.
            layer = self._layer(scope)
            store: dict[Any, Any] = getattr(layer, kind)
            store[key] = value
            layer.owners[kind, key] = ctx.fiber
            self._touch(layer)
            # The undo is yielded before the change event: a listener that raises
            # rolls the registration back and the error reaches the caller.
            yield functools.partial(self._unregister, layer, kind, key, scope)
            self._changed()

        return ctx.effect(body, label=label)

    def _unregister(self, layer: _Layer, kind: str, key: object, scope: object) -> None:
        # Runs once per registration (a disposer never undoes twice); an emptied
        # scope layer is reclaimed so a disposed scope leaves nothing behind.
        del getattr(layer, kind)[key]
        del layer.owners[kind, key]
        self._touch(layer)
        if scope is not None and layer.empty():
            del self._scoped[id(scope)]
        self._changed()

    @staticmethod
    def _duplicate(
        kind: str, name: str, scope: object, hint: str, *, holder: Fiber, claimant: Fiber
    ) -> DuplicatePromptNameError:
        where = (
            f"({hint}, register through that agent's `agent.ctx` instead)"
            if scope is None
            else "in this scope"
        )
        return DuplicatePromptNameError(
            f'prompt {kind} "{name}" is already registered {where}',
            kind=f"prompt {kind}",
            name=name,
            holder=holder,
            claimant=claimant,
        )

    def section(self, section: PromptSection) -> Disposer:
        """Contribute a section to the caller's layer; returns its exact disposer."""
        name: object = section.name
        if not isinstance(name, str) or not name:
            error = PromptRegistrationError if name == "" else PromptTypeError
            raise error(f"prompt section name must be a non-empty string, got {name!r}")
        order: object = section.order
        if (
            isinstance(order, bool)
            or not isinstance(order, int | float)
            or not math.isfinite(order)
        ):
            raise SectionOrderError(f'prompt section "{name}" order must be a finite number')
        text: object = section.text
        if not isinstance(text, str) and not callable(text):
            raise PromptTypeError(
                f'prompt section "{name}" text must be a string or a callable, '
                f"got {type(text).__name__}"
            )
        return self._register_named("section", "sections", name, section, "a per-agent override")

    def tools(self, provider: ToolProvider) -> Disposer:
        """Contribute a tool-schema provider to the caller's layer."""
        checked: object = provider
        if not callable(checked):
            raise PromptTypeError(
                f"a tool provider must be callable, got {type(provider).__name__}"
            )
        return self._register(self.ctx, "tools", object(), provider, "prompt tool provider")

    def variable(self, name: str, provider: VariableProvider) -> Disposer:
        """Contribute the variable ``{{name}}`` to the caller's layer."""
        checked: object = name
        if not isinstance(checked, str) or not VARIABLE_NAME.fullmatch(checked):
            raise PromptRegistrationError(
                f'invalid prompt variable name "{name}" (must match /^[a-z][a-z0-9_]*$/)'
            )
        checked = provider
        if not callable(checked):
            raise PromptTypeError(
                f'the provider of prompt variable "{name}" must be callable, '
                f"got {type(provider).__name__}"
            )
        return self._register_named("variable", "variables", name, provider, "a per-agent value")

    def _register_named(
        self, kind: str, store: str, name: str, value: object, purpose: str
    ) -> Disposer:
        """Register ``value`` as ``name`` in the caller's layer, refusing a duplicate."""
        ctx = self.ctx
        layer = self._peek(ctx.scope)
        if layer is not None and name in getattr(layer, store):
            holder = layer.owners[store, name]
            raise self._duplicate(
                kind, name, ctx.scope, f"for {purpose}", holder=holder, claimant=ctx.fiber
            )
        return self._register(ctx, store, name, value, f"prompt {kind} {name}")

    # -- assembly -----------------------------------------------------------------------

    async def assemble(self, context: AssembleContext | None = None) -> PromptAssembly:
        """Build the assembly for ``context`` (scoped layer over global) and run the
        ``system-prompt/assemble`` waterfall for that scope."""
        if context is None:
            context = AssembleContext()
        scope = context.scope
        glob = self._global
        layer = None
        if scope is not None:
            entry = self._scoped.get(id(scope))
            if entry is not None:
                layer = entry[1]

        variables: dict[str, str | None] = {}
        self._resolve_variables(glob.variables, context, variables)
        if layer is not None:
            self._resolve_variables(layer.variables, context, variables)

        # After the variables, as sections and tool providers are read after them.
        view = self._view_of(glob, layer)
        tools = self._tools(view, context)
        texts = view.texts
        if view.dynamic:
            resolved = list(texts)
            for i in view.dynamic:
                resolved[i] = texts[i](context)
            texts = tuple(resolved)

        assembly = CachedAssembly.build(view, texts, variables, tools)
        if not self._assemble_event.heard(scope):
            return assembly
        result: PromptAssembly = await self.home_ctx.waterfall(
            "system-prompt/assemble", assembly, context, inner=lambda: assembly, scope=scope
        )
        return result

    def _view_of(self, glob: _Layer, layer: _Layer | None) -> View:
        """The view of the global layer (with ``layer`` over it), rebuilt if stale."""
        holder = glob if layer is None else layer
        stamp = (glob.version, 0 if layer is None else layer.version)
        view = holder.view
        if view is None or view.stamp != stamp:
            merged = dict(glob.sections)
            providers = tuple(glob.tools.values())
            if layer is not None:
                merged.update(layer.sections)
                providers += tuple(layer.tools.values())
            # Merged by name first, so a shadowed global text function is never called;
            # then stable-sorted by order (ties keep registration order).
            view = holder.view = View(stamp, sorted(merged.values(), key=_order), providers)
        return view

    def _resolve_variables(
        self,
        providers: dict[str, VariableProvider],
        context: AssembleContext,
        out: dict[str, str | None],
    ) -> None:
        """Call every provider in registration order, including ones added meanwhile."""
        changes = self._changes
        called = list(providers.items())
        for name, provider in called:
            out[name] = provider(context)
        if self._changes != changes:  # a provider registered something meanwhile
            _resolve_late(providers, context, out, {name for name, _ in called})

    def _tools(self, view: View, context: AssembleContext) -> ToolMemo:
        """Call the view's tool providers; their ordered tools, memoised by result."""
        schemas: list[ToolSchema] = []
        known: list[str] = []
        for provider in view.tools:
            contributed = provider(context)
            schemas.extend(contributed.schemas)
            if contributed.known_names is None:
                known.extend(schema.name for schema in contributed.schemas)
            else:
                known.extend(contributed.known_names)
        memo = view.tool_memo
        if memo is None or memo.known != known or memo.schemas != schemas:
            ordered = order_tools(schemas, known, self._tool_order)
            memo = view.tool_memo = ToolMemo(schemas, known, ordered)
        return memo


def _order(section: PromptSection) -> float:
    return section.order


def _resolve_late(
    providers: dict[str, VariableProvider],
    context: AssembleContext,
    out: dict[str, str | None],
    done: set[str],
) -> None:
    """Call the providers registered while the others were being called, until none is
    new (a name called once is not called again)."""
    while True:
        fresh = [(name, p) for name, p in providers.items() if name not in done]
        if not fresh:
            return
        for name, provider in fresh:
            done.add(name)
            out[name] = provider(context)
