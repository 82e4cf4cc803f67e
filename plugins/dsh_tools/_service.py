"""The ``Tools`` service: layered tool registration, restrictions and execution."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import CoroutineType
from typing import Any

from anyio._core._eventloop import get_async_backend  # not re-exported; see execute
from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, DshError, Fiber, Service, hookspec
from dsh_system_prompt import AssembleContext, ToolProviderResult, ToolSchema

from ._arguments import ArgumentNames, argument_names, shown_schema, validate_arguments
from ._errors import (
    DuplicateToolError,
    ToolArgumentsError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolRestrictionError,
    ToolTypeError,
)
from ._types import TOOL_NAME, Tool, ToolCall, ToolResult

__all__ = ["Tools", "ToolsConfig", "ToolsSpecs"]


class ToolsSpecs:
    """The events owned by the tools plugin."""

    @hookspec
    def tools_change(self) -> None:
        """A tool or a restriction was added or removed (emitted, unfiltered)."""


class ToolsConfig(BaseModel):
    """Config of the ``tools`` plugin: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class _Entry:
    """A registered tool with the JSON Schema and the argument names it takes, computed
    once at registration."""

    tool: Tool[Any]
    schema: ToolSchema
    owner: Fiber
    names: ArgumentNames


@dataclass(frozen=True)
class _Mask:
    """One restriction, with the names frozen when it was made."""

    allow: frozenset[str] | None
    deny: frozenset[str] | None
    refusal: Callable[[str], ToolResult] | None = None
    #: Whether it also covers the scope's own tools (``restrict(own=True)``).
    own: bool = False

    def admits(self, name: str) -> bool:
        if self.allow is not None and name not in self.allow:
            return False
        return self.deny is None or name not in self.deny


@dataclass
class _Layer:
    """What one scope adds to the global tools: its own tools and its masks."""

    scope: object
    tools: dict[str, _Entry] = field(default_factory=dict)
    masks: dict[object, _Mask] = field(default_factory=dict)
    #: What the provider last answered for this layer (the global one: for every scope
    #: without a layer), with the change count it was made at.
    provided: tuple[int, ToolProviderResult] | None = None

    def admits(self, name: str) -> bool:
        return all(mask.admits(name) for mask in self.masks.values())

    def admits_own(self, name: str) -> bool:
        """Whether the restrictions made with ``own=True`` admit an own tool."""
        return all(mask.admits(name) for mask in self.masks.values() if mask.own)


class Tools(Service):
    """The tool registry and executor (ctx key ``tools``).

    Registrations land in the layer of the caller's scope (``self.ctx.scope``); a scoped
    tool shadows a global one of the same name, and a scope's restrictions hide global
    tools from that scope only. The service contributes the visible schemas to the
    system prompt as a tool provider.
    """

    key = "tools"
    name = "tools"
    Config = ToolsConfig
    inject = ("system_prompt",)
    hookspecs = ToolsSpecs

    def __init__(self, ctx: Context, config: Any = None) -> None:
        ctx.events.add_hookspecs(ToolsSpecs)
        self._global = _Layer(None)
        self._scoped: dict[int, _Layer] = {}
        #: Counts the changes (``tools/change``): a provider answer made at another
        #: count is stale.
        self._changes = 0
        #: The running backend's ``checkpoint_if_cancelled``, looked up at the first call.
        self._check_cancelled: Callable[[], Awaitable[None]] | None = None
        super().__init__(ctx, config)

    def setup(self) -> Disposer:
        # The provider answers for every scope itself, so it always sits in the global
        # layer, even when this service was loaded through a scoped context.
        prompt = self.home_ctx.scoped(None).system_prompt
        disposer: Disposer = prompt.tools(self._provide)
        return disposer

    # -- layers -------------------------------------------------------------------------

    def _scope_layer(self, scope: object) -> _Layer | None:
        """The layer of a scope (None for the global scope or a scope with nothing)."""
        return None if scope is None else self._scoped.get(id(scope))

    def _layer(self, scope: object) -> _Layer:
        if scope is None:
            return self._global
        layer = self._scoped.get(id(scope))
        if layer is None:
            layer = self._scoped[id(scope)] = _Layer(scope)
        return layer

    def _changed(self) -> None:
        self._changes += 1
        self.home_ctx.emit("tools/change")

    def _add(self, ctx: Context, store: str, key: object, value: object, label: str) -> Disposer:
        scope = ctx.scope

        def body() -> Iterator[Callable[[], None]]:
            layer = self._layer(scope)
            items: dict[Any, Any] = getattr(layer, store)
            items[key] = value
            # The undo is yielded before the change event, so a listener that raises
            # rolls the registration back and the error reaches the caller.
            yield functools.partial(self._remove, layer, items, key)
            self._changed()

        return ctx.effect(body, label=label)

    def _remove(self, layer: _Layer, items: dict[Any, Any], key: object) -> None:
        del items[key]
        if layer.scope is not None and not layer.tools and not layer.masks:
            del self._scoped[id(layer.scope)]
        self._changed()

    # -- registration -------------------------------------------------------------------

    def register(self, tool: Tool[Any]) -> Disposer:
        """Add ``tool`` to the caller's layer (global, or the caller's scope).

        Returns the exact disposer of the registration. Raises, leaving nothing
        behind, :class:`ToolRegistrationError` for a bad or duplicate name or a model
        without a JSON Schema, and :class:`ToolTypeError` for a wrong type. The schema
        shown to the model is ``tool.json_schema`` when given, else the model's (with
        ``additionalProperties: false`` unless the model takes any argument name: see
        :mod:`dsh_tools._arguments`).
        """
        checked: object = tool
        if not isinstance(checked, Tool):
            raise ToolTypeError(f"tools.register() expects a Tool, got {type(checked).__name__}")
        name: object = tool.name
        if not isinstance(name, str):
            raise ToolTypeError(f"tool name must be a string, got {type(name).__name__}")
        if not TOOL_NAME.fullmatch(name):
            raise ToolRegistrationError(
                f'invalid tool name "{name}": it must match ^[a-zA-Z0-9_-]{{1,64}}$'
            )
        description: object = tool.description
        if not isinstance(description, str):
            raise ToolTypeError(
                f'tool "{name}" description must be a string, got {type(description).__name__}'
            )
        parameters: object = tool.parameters
        if not (isinstance(parameters, type) and issubclass(parameters, BaseModel)):
            raise ToolTypeError(
                f'tool "{name}" parameters must be a pydantic BaseModel subclass, '
                f"got {parameters!r}"
            )
        if not callable(tool.execute):
            raise ToolTypeError(
                f'tool "{name}" execute must be callable as async (args, call), '
                f"got {type(tool.execute).__name__}"
            )
        given: object = tool.json_schema
        if given is not None and not isinstance(given, Mapping):
            raise ToolTypeError(
                f'tool "{name}" json_schema must be a mapping (a JSON Schema object), '
                f"got {type(given).__name__}"
            )
        ctx = self.ctx
        scope = ctx.scope
        layer = self._global if scope is None else self._scope_layer(scope)
        if layer is not None and name in layer.tools:
            holder = layer.tools[name].owner
            where = (
                "(for a per-agent variant, register through that agent's `agent.ctx` instead)"
                if scope is None
                else "in this scope"
            )
            raise DuplicateToolError(
                f'tool "{name}" is already registered {where}',
                kind="tool",
                name=name,
                holder=holder,
                claimant=ctx.fiber,
            )
        if given is not None:
            schema = dict(given)
        else:
            try:
                schema = parameters.model_json_schema()
            except Exception as exc:
                raise ToolRegistrationError(
                    f'tool "{name}" parameters have no JSON Schema: {exc}'
                ) from exc
        names = argument_names(parameters, schema, forwarded=given is not None)
        entry = _Entry(
            tool,
            ToolSchema(
                name=name, description=tool.description, parameters=shown_schema(schema, names)
            ),
            ctx.fiber,
            names,
        )
        return self._add(ctx, "tools", name, entry, f"tool {name}")

    def names(self) -> list[str]:
        """The names of the global tools, in registration order."""
        return list(self._global.tools)

    def restrict(
        self,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        *,
        refusal: Callable[[str], ToolResult] | None = None,
        own: bool = False,
    ) -> Disposer:
        """Hide global tools from the caller's scope, for schemas and execution.

        ``allow`` keeps only the named global tools (so globals registered later stay
        hidden); ``deny`` hides the named ones (so globals registered later show). The
        names are copied now; several restrictions intersect. The scope's own tools are
        not hidden unless ``own`` is true: then the restriction covers them too (those
        registered before and after it), and its names may name them. A call of a name
        this restriction does not admit (a hidden tool, or with ``allow`` any other name)
        is answered ``refusal(name)`` when given, else as an unknown tool. Returns the
        exact disposer of the restriction.
        """
        ctx = self.ctx
        if ctx.scope is None:
            raise ToolRestrictionError("tools.restrict() requires a scoped context (agent.ctx)")
        allowed = _names("allow", allow)
        denied = _names("deny", deny)
        if allowed is None and not denied:
            raise ToolRestrictionError(
                "tools.restrict() without allow= and with no names to deny is a no-op; "
                "pass allow=[...] to keep only those global tools or deny=[...] to hide some"
            )
        named = dict.fromkeys([*(allowed or ()), *(denied or ())])
        layer = self._scope_layer(ctx.scope)
        mine = layer.tools if own and layer is not None else {}
        unknown = [name for name in named if name not in self._global.tools and name not in mine]
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            listed = ", ".join(f'"{name}"' for name in unknown)
            known = ", ".join(sorted({*self._global.tools, *mine})) or "(none)"
            kind = "tool" if own else "global tool"
            raise ToolRestrictionError(
                f"tools.restrict() names unknown {kind}{plural} {listed}; known {kind}s: {known}"
            )
        if refusal is not None and not callable(refusal):
            raise ToolTypeError(
                f"tools.restrict() refusal= must be callable as (name) -> ToolResult, "
                f"got {type(refusal).__name__}"
            )
        mask = _Mask(
            None if allowed is None else frozenset(allowed),
            None if denied is None else frozenset(denied),
            refusal,
            own,
        )
        return self._add(ctx, "masks", object(), mask, "tool restriction")

    # -- views --------------------------------------------------------------------------

    def _visible(self, layer: _Layer | None) -> Iterator[_Entry]:
        if layer is None:
            yield from self._global.tools.values()
            return
        for name, entry in self._global.tools.items():
            if name not in layer.tools and layer.admits(name):
                yield entry
        for name, entry in layer.tools.items():
            if layer.admits_own(name):
                yield entry

    def _refused(self, scope: object, name: str) -> ToolResult | None:
        """The answer of the first restriction of ``scope`` that refuses ``name`` with
        a ``refusal``, if any."""
        layer = self._scope_layer(scope)
        if layer is None:
            return None
        own = name in layer.tools
        for mask in layer.masks.values():
            if (mask.own or not own) and mask.refusal is not None and not mask.admits(name):
                try:
                    return mask.refusal(name)
                except Exception as exc:  # execute never raises for a tool's plugin
                    return self._failed(name, exc)
        return None

    def _provide(self, context: AssembleContext) -> ToolProviderResult:
        layer = self._scope_layer(context.scope)
        holder = self._global if layer is None else layer
        provided = holder.provided
        if provided is not None and provided[0] == self._changes:
            # Unchanged since: the same answer (the system prompt only reads it).
            return provided[1]
        # The system prompt copies every schema into each assembly, so the cached
        # schema objects are handed over as they are.
        schemas = [entry.schema for entry in self._visible(layer)]
        known = list(self._global.tools)
        if layer is not None:
            known.extend(name for name in layer.tools if name not in self._global.tools)
        result = ToolProviderResult(schemas=schemas, known_names=known)
        holder.provided = (self._changes, result)
        return result

    # -- execution ----------------------------------------------------------------------

    async def execute(
        self, name: str, arguments: str | Mapping[str, Any], call: ToolCall | None = None
    ) -> ToolResult:
        """Run the tool ``name`` visible to the caller's scope and return its result.

        ``arguments`` is the model's JSON text (empty means ``{}``) or a dict; ``call``
        defaults to a call with an empty id and no agent. Never
        raises for an unknown or hidden tool, invalid arguments (an argument name the
        tool does not take included), the tool's own
        exception or a wrong return type: each becomes an error result with a code.
        Cancellation propagates; a call whose caller is already cancelled never starts.
        """
        # anyio's checkpoint asks which backend runs at every call; the service lives
        # in one event loop, so its backend's check is looked up once.
        check = self._check_cancelled
        if check is None:
            check = self._check_cancelled = get_async_backend().checkpoint_if_cancelled
        await check()
        if call is None:
            call = ToolCall(id="")
        # The tool the caller's scope sees: its own (unless its own=True restrictions
        # hide it), else the global one its restrictions admit. (``_scope_layer``'s
        # lookup, inline: this runs for every call.)
        scope = self.ctx.scope
        layer = None if scope is None else self._scoped.get(id(scope))
        entry: _Entry | None = None
        if layer is None:
            entry = self._global.tools.get(name)
        elif name in layer.tools:
            if layer.admits_own(name):
                entry = layer.tools[name]
        elif layer.admits(name):
            entry = self._global.tools.get(name)
        if entry is None:
            refused = self._refused(scope, name)
            if refused is not None:
                return refused
            return ToolResult(
                content=f'unknown tool "{name}"', is_error=True, code=ToolNotFoundError.code
            )
        tool = entry.tool
        try:
            args = validate_arguments(name, tool.parameters, entry.names, arguments)
        except ToolArgumentsError as exc:
            return _invalid(str(exc))
        except Exception as exc:  # a validator of the tool's model crashed
            return self._failed(name, exc)
        try:
            pending: object = tool.execute(args, call)
            # A coroutine (an async def) is by far the usual case: skip the generic check.
            if type(pending) is not CoroutineType and not inspect.isawaitable(pending):
                return _misbehaved(
                    f'tool "{name}" execute returned {type(pending).__name__} instead of '
                    "an awaitable (it must be an async function)"
                )
            result: object = await pending
        except Exception as exc:
            return self._failed(name, exc)
        if type(result) is str or isinstance(result, str):  # str exactly: no isinstance
            return ToolResult(content=result)
        if isinstance(result, ToolResult):
            return result
        return _misbehaved(
            f'tool "{name}" returned {type(result).__name__}; expected str or ToolResult'
        )

    def _failed(self, name: str, exc: Exception) -> ToolResult:
        self.home_ctx.logger.debug("tool %r raised", name, exc_info=exc)
        code = exc.code if isinstance(exc, DshError) else ToolExecutionError.code
        return ToolResult(content=f"Error: {_message(exc)}", is_error=True, code=code)


def _names(param: str, value: Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    checked: object = value
    if isinstance(checked, str | bytes) or not isinstance(checked, Iterable):
        raise ToolTypeError(
            f"tools.restrict() {param}= must be a list of tool names, got {type(checked).__name__}"
        )
    names = list(checked)
    for item in names:
        if not isinstance(item, str):
            raise ToolTypeError(
                f"tools.restrict() {param}= must hold tool names (strings), "
                f"got {type(item).__name__} {item!r}"
            )
    return names


def _message(exc: Exception) -> str:
    try:
        text = str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"
    return text or type(exc).__name__


def _invalid(problems: str) -> ToolResult:
    return ToolResult(
        content=f"invalid arguments: {problems}", is_error=True, code=ToolArgumentsError.code
    )


def _misbehaved(message: str) -> ToolResult:
    return ToolResult(content=f"Error: {message}", is_error=True, code=ToolExecutionError.code)
