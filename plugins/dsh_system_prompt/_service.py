"""The ``SystemPrompt`` service: sections, tool providers and variables, in layers."""

from __future__ import annotations

import copy
import functools
import marshal
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, Fiber, Service, hookspec, validate_config

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
    AssembledSection,
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
        self._global = _Layer()
        self._scoped: dict[int, tuple[object, _Layer]] = {}
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
        layers = [self._global]
        if scope is not None:
            entry = self._scoped.get(id(scope))
            if entry is not None:
                layers.append(entry[1])

        variables: dict[str, str | None] = {}
        for layer in layers:
            _resolve_variables(layer.variables, context, variables)

        merged: dict[str, PromptSection] = {}
        for layer in layers:
            merged.update(layer.sections)

        providers = [p for layer in layers for p in layer.tools.values()]
        schemas: list[ToolSchema] = []
        known: list[str] = []
        for provider in providers:
            contributed = provider(context)
            schemas.extend(
                ToolSchema(
                    name=schema.name,
                    description=schema.description,
                    parameters=_copy_json(schema.parameters),
                )
                for schema in contributed.schemas
            )
            if contributed.known_names is None:
                known.extend(schema.name for schema in contributed.schemas)
            else:
                known.extend(contributed.known_names)

        sections = [
            AssembledSection(
                name=s.name,
                order=s.order,
                text=s.text(context) if callable(s.text) else s.text,
            )
            for s in sorted(merged.values(), key=_order)
        ]
        tools = order_tools(schemas, known, self._tool_order)
        assembly = PromptAssembly(sections=sections, tools=tools, variables=variables)
        result: PromptAssembly = await self.home_ctx.waterfall(
            "system-prompt/assemble", assembly, context, inner=lambda: assembly, scope=scope
        )
        return result


def _order(section: PromptSection) -> float:
    return section.order


def _resolve_variables(
    providers: dict[str, VariableProvider],
    context: AssembleContext,
    out: dict[str, str | None],
) -> None:
    """Call every provider in registration order, including ones added meanwhile."""
    done: set[str] = set()
    while True:
        fresh = [(name, p) for name, p in providers.items() if name not in done]
        if not fresh:
            return
        for name, provider in fresh:
            done.add(name)
            out[name] = provider(context)


def _copy_json(value: Any) -> Any:
    """A deep copy of a tool's JSON Schema. ``marshal`` copies dicts, lists and
    scalars in C, several times faster than ``copy.deepcopy``; anything it cannot
    serialise is deep-copied the general way."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        return copy.deepcopy(value)
