"""Plugin kinds: ``dsh.Plugin`` / ``dsh.Service`` subclasses, functions and modules."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from ._errors import InvalidPluginError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ._context import Context
    from ._disposer import EffectBody
    from ._fiber import Fiber

__all__ = ["Plugin", "PluginSpec", "Service", "hookimpl_names", "plugin_spec"]


class Plugin:
    """Base class of class-based plugins.

    The runtime constructs ``cls(ctx, config)`` when the fiber activates and runs
    :meth:`setup` as the fiber's main effect body. Methods decorated with
    ``@dsh.hookimpl`` listen to events while the fiber is active.
    """

    #: The plugin's name in logs and errors (default: the class name).
    name: ClassVar[str | None] = None
    #: A pydantic model validating the config; ``None`` passes the raw config through.
    Config: ClassVar[type[BaseModel] | None] = None
    #: Service keys that must be provided before the plugin activates.
    inject: ClassVar[tuple[str, ...] | list[str]] = ()
    #: Service keys the plugin uses when they are provided: it activates without them,
    #: and restarts when one appears, goes away or is replaced.
    optional: ClassVar[tuple[str, ...] | list[str]] = ()
    #: A hookspec class declaring the events this plugin owns.
    hookspecs: ClassVar[type | ModuleType | None] = None

    def __init__(self, ctx: Context, config: Any) -> None:
        self.ctx = ctx
        self.config = config

    def setup(self) -> EffectBody:
        """The fiber's main effect body (any form ``ctx.effect`` accepts)."""
        return None


class Service(Plugin):
    """A plugin that provides itself at ``ctx.<key>`` while its fiber is active.

    Reached through ``ctx.<key>`` (or ``ctx.get(key)``), the service is a *view* whose
    ``self.ctx`` is the caller's context, so effects it creates for a caller are undone
    with that caller; ``self.home_ctx`` is the service's own context.
    """

    #: The ctx attribute the service is provided at.
    key: ClassVar[str]

    def __init__(self, ctx: Context, config: Any) -> None:
        super().__init__(ctx, config)
        self.home_ctx = ctx
        ctx.provide(type(self).key, self)

    def _dsh_view(self, caller: Context) -> Service:
        cls = type(self)
        # Kept on the class itself (not in a module-level table), so a service class
        # made at run time is collected with its view class once nothing uses it.
        view_cls: type[Service] | None = cls.__dict__.get("_dsh_view_class")
        if view_cls is None:
            view_cls = _make_view_class(cls)
            type.__setattr__(cls, "_dsh_view_class", view_cls)
        view = object.__new__(view_cls)
        view.__dict__ = self.__dict__
        view._dsh_caller = caller  # type: ignore[attr-defined]  # slot of the view class
        return view


def _caller_ctx(view: Any) -> Context:
    ctx: Context = view._dsh_caller
    return ctx


def _make_view_class(cls: type[Service]) -> type[Service]:
    # A subclass that shares the service's __dict__ (so state is one) and reads ``ctx``
    # from a per-view slot, shadowing the instance attribute.
    namespace = {
        "__slots__": ("_dsh_caller",),
        "ctx": property(_caller_ctx),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    return type(cls.__name__, (cls,), namespace)


class PluginSpec:
    """What the runtime needs to know about one plugin object (read-only by convention;
    a plain slotted class: ``import dsh`` does not load ``dataclasses``)."""

    __slots__ = (
        "config_model",
        "hookspecs",
        "inject",
        "name",
        "obj",
        "optional",
        "provides",
        "run",
        "watches",
    )

    def __init__(
        self,
        *,
        obj: object,
        name: str,
        config_model: type[BaseModel] | None,
        inject: tuple[str, ...],
        hookspecs: type | ModuleType | None,
        run: Callable[[Fiber, Context, Any], EffectBody],
        provides: str | None = None,
        optional: tuple[str, ...] = (),
    ) -> None:
        self.obj = obj
        self.name = name
        self.config_model = config_model
        self.inject = inject
        self.hookspecs = hookspecs
        self.run = run
        #: The service key a ``dsh.Service`` subclass will provide, known before it loads.
        self.provides = provides
        #: Service keys used when present; a change of their providers restarts the fiber.
        self.optional = optional
        #: Every service key whose provider matters to the fiber (injected or optional).
        self.watches = inject + optional


def plugin_spec(obj: object, name: str | None = None) -> PluginSpec:
    """Describe ``obj`` as a plugin, or raise :class:`InvalidPluginError`."""
    if isinstance(obj, ModuleType) and hasattr(obj, "plugin"):
        obj = obj.plugin
    run: Callable[[Fiber, Context, Any], EffectBody]
    if inspect.isclass(obj):
        if not issubclass(obj, Plugin):
            raise InvalidPluginError(
                f"invalid plugin {obj.__qualname__}: a class plugin must subclass dsh.Plugin"
            )
        if issubclass(obj, Service) and not isinstance(getattr(obj, "key", None), str):
            raise InvalidPluginError(
                f"invalid plugin {obj.__qualname__}: a dsh.Service subclass must set "
                'the class attribute key = "<ctx attribute>"'
            )
        run = _class_runner(obj)
        default = obj.__name__
    elif callable(getattr(obj, "apply", None)):
        run = _function_runner(obj.apply)  # type: ignore[attr-defined]  # checked above
        default = getattr(obj, "__name__", None) or type(obj).__name__
    elif callable(obj):
        run = _function_runner(obj)
        default = getattr(obj, "__name__", None) or type(obj).__name__
    else:
        raise InvalidPluginError(
            f"invalid plugin {obj!r}: expected a dsh.Plugin subclass, a function "
            "apply(ctx, config), or a module or object with an apply attribute"
        )
    own_name = getattr(obj, "name", None)
    config_model = getattr(obj, "Config", None)
    if config_model is not None and not _is_model(config_model):
        raise InvalidPluginError(
            f"invalid plugin {default}: Config must be a pydantic BaseModel subclass"
        )
    inject = _service_keys(obj, "inject", default)
    optional = _service_keys(obj, "optional", default)
    both = [key for key in optional if key in inject]
    if both:
        raise InvalidPluginError(
            f"invalid plugin {default}: {', '.join(repr(k) for k in both)} is both in "
            "inject and in optional; a service is either required or optional"
        )
    return PluginSpec(
        obj=obj,
        name=own_name if isinstance(own_name, str) and own_name else (name or default),
        config_model=config_model,
        inject=inject,
        hookspecs=getattr(obj, "hookspecs", None),
        run=run,
        provides=obj.key if inspect.isclass(obj) and issubclass(obj, Service) else None,
        optional=optional,
    )


def _is_model(config_model: object) -> bool:
    # pydantic is imported here, not with dsh: a plugin that declares a Config has it.
    from pydantic import BaseModel

    return inspect.isclass(config_model) and issubclass(config_model, BaseModel)


def _service_keys(obj: object, attr: str, plugin: str) -> tuple[str, ...]:
    keys = getattr(obj, attr, ())
    if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
        raise InvalidPluginError(
            f"invalid plugin {plugin}: {attr} must be a list of service keys (strings)"
        )
    return tuple(keys)


def _class_runner(cls: type[Plugin]) -> Callable[[Fiber, Context, Any], EffectBody]:
    def run(fiber: Fiber, ctx: Context, config: Any) -> EffectBody:
        instance = cls(ctx, config)
        fiber.instance = instance
        if hookimpl_names(cls):
            fiber.register_hookimpls(instance)
        return instance.setup()

    return run


def _function_runner(fn: Callable[..., Any]) -> Callable[[Fiber, Context, Any], EffectBody]:
    def run(fiber: Fiber, ctx: Context, config: Any) -> EffectBody:
        return fn(ctx, config)

    return run


#: Weak keys: a plugin class made at run time is not kept alive by this cache.
_HOOKIMPLS: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


def hookimpl_names(cls: type) -> tuple[str, ...]:
    """Names of the ``@dsh.hookimpl`` methods of ``cls`` (cached per class)."""
    names = _HOOKIMPLS.get(cls)
    if names is None:
        names = _HOOKIMPLS[cls] = tuple(
            attr
            for attr in dir(cls)
            if not attr.startswith("__")
            and hasattr(inspect.getattr_static(cls, attr, None), "dsh_impl")
        )
    return names
