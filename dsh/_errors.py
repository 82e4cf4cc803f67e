"""The error hierarchy of dsh.

Every error raised by dsh derives from :class:`DshError` and carries a stable ``code``
string (the table lives in ``docs/errors.md``). Where a Python user would reach for a
builtin in an ``except`` clause, the class derives from that builtin too.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ConfigError",
    "DeploymentError",
    "DshError",
    "DuplicateNameError",
    "EventUsageError",
    "InactiveContextError",
    "InvalidEffectError",
    "InvalidPluginError",
    "PluginLoadError",
    "ReloadRefusedError",
    "ServiceConflictError",
    "ServiceNotFoundError",
    "UnknownEventError",
]


class DshError(Exception):
    """Base class of every dsh error; ``code`` is stable across releases."""

    code: ClassVar[str] = "DSH_ERROR"


class ConfigError(DshError, ValueError):
    """A plugin config (or a deployment file) failed validation."""

    code = "CONFIG_INVALID"


class PluginLoadError(DshError, ImportError):
    """A plugin could not be found or imported."""

    code = "PLUGIN_LOAD"


class DeploymentError(PluginLoadError):
    """A deployment failed to start; ``failures`` lists one line per problem."""

    code = "DEPLOYMENT_FAILED"

    def __init__(self, message: str, failures: list[str] | None = None) -> None:
        super().__init__(message)
        self.failures: list[str] = list(failures or [])


class ReloadRefusedError(DeploymentError):
    """A reload of a running deployment was refused because it would leave an entry
    without a service it requires; ``failures`` names each such entry (file, line, id)
    and the service. The running version stays as it was."""

    code = "RELOAD_REFUSED"


class _Conflict(Exception):
    """Two owners claimed one thing: ``holder`` got it, ``claimant`` asked for it too
    (either may be None when unknown). A mixin of the conflict errors, not an error of
    its own (so it has no code)."""

    def __init__(self, message: str, *, holder: Any, claimant: Any) -> None:
        super().__init__(message)
        self.holder = holder
        self.claimant = claimant


class DuplicateNameError(_Conflict, DshError, ValueError):
    """Two plugins claimed one name (a tool, a prompt section, a model, ...).

    ``holder`` is the fiber that registered it, ``claimant`` the one that asked for it
    too (either may be None when unknown); ``kind`` and ``name`` say what was claimed.
    A deployment reports the conflict once, against whichever of the two entries comes
    later, whichever of them happened to load first.
    """

    code = "DUPLICATE_NAME"

    def __init__(
        self, message: str, *, kind: str, name: str, holder: Any = None, claimant: Any = None
    ) -> None:
        super().__init__(message, holder=holder, claimant=claimant)
        self.kind = kind
        self.name = name


class InactiveContextError(DshError, RuntimeError):
    """An effect, listener or plugin was created through a context that is not alive."""

    code = "INACTIVE_CONTEXT"


class InvalidEffectError(DshError, TypeError):
    """An effect body returned or yielded something that is not a disposer."""

    code = "INVALID_EFFECT"


class InvalidPluginError(DshError, TypeError):
    """``ctx.plugin`` was given something that is not a plugin."""

    code = "INVALID_PLUGIN"


class ServiceNotFoundError(DshError, AttributeError):
    """``ctx.<key>`` names a service that has no active provider."""

    code = "SERVICE_MISSING"


class ServiceConflictError(_Conflict, DshError, RuntimeError):
    """A second provider tried to provide a service key that is taken.

    ``key`` is the service key, ``holder`` the fiber that provides it, ``claimant`` the
    one that tried to provide it too (either may be None when unknown). A deployment
    reports the conflict once, against the later of the two entries.
    """

    code = "SERVICE_CONFLICT"

    def __init__(
        self, message: str, *, key: str = "", holder: Any = None, claimant: Any = None
    ) -> None:
        super().__init__(message, holder=holder, claimant=claimant)
        self.key = key


class UnknownEventError(DshError, LookupError):
    """An event name that no hookspec declares was listened to or dispatched."""

    code = "UNKNOWN_EVENT"


class EventUsageError(DshError, TypeError):
    """An event was dispatched or answered the wrong way.

    The wrong number of arguments, ``waterfall`` on an event that is not one, an async
    listener reached by the synchronous ``emit``/``bail``, a waterfall listener that
    returned ``None`` or called ``call_next`` twice.
    """

    code = "EVENT_USAGE"
