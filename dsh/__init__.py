"""dsh: a cordis-style plugin runtime and the agent harness built on it.

Start a root with ``async with dsh.Context() as root:``, add plugins with
``root.plugin(...)`` or ``await dsh.load_deployment("dsh.yml", root)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._check import CoreSpecs, counted
from ._context import Context
from ._disposer import Disposer, EffectBody
from ._errors import (
    ConfigError,
    DeploymentError,
    DshError,
    DuplicateNameError,
    EventUsageError,
    InactiveContextError,
    InvalidEffectError,
    InvalidPluginError,
    PluginLoadError,
    ReloadRefusedError,
    ServiceConflictError,
    ServiceNotFoundError,
    UnknownEventError,
)
from ._events import ALL_SCOPES, EventBus, hookimpl, hookspec
from ._fiber import Fiber, FiberState
from ._inflight import InFlight
from ._plugin import Plugin, Service

if TYPE_CHECKING:
    from ._commands import (
        DEFAULT_DEPLOYMENT,
        Command,
        CommandError,
        add_deployment_argument,
        deployment_file,
        run_deployment_command,
    )
    from ._config import EntryInfo, validate_config
    from ._deployment import Deployment, leave_out_unset_env, load_deployment
    from ._redeploy import Replan, deployment_of
    from ._report import CheckReport
    from ._resolve import forget_modules

__all__ = [
    "ALL_SCOPES",
    "DEFAULT_DEPLOYMENT",
    "CheckReport",
    "Command",
    "CommandError",
    "ConfigError",
    "Context",
    "CoreSpecs",
    "Deployment",
    "DeploymentError",
    "Disposer",
    "DshError",
    "DuplicateNameError",
    "EffectBody",
    "EntryInfo",
    "EventBus",
    "EventUsageError",
    "Fiber",
    "FiberState",
    "InFlight",
    "InactiveContextError",
    "InvalidEffectError",
    "InvalidPluginError",
    "Plugin",
    "PluginLoadError",
    "ReloadRefusedError",
    "Replan",
    "Service",
    "ServiceConflictError",
    "ServiceNotFoundError",
    "UnknownEventError",
    "add_deployment_argument",
    "counted",
    "deployment_file",
    "deployment_of",
    "forget_modules",
    "hookimpl",
    "hookspec",
    "leave_out_unset_env",
    "load_deployment",
    "run_deployment_command",
    "validate_config",
]


def __getattr__(name: str) -> Any:
    """Names whose modules ``import dsh`` leaves alone until first use: deployments
    bring YAML, pydantic and the entry points; commands argparse and more."""
    if name in ("Deployment", "leave_out_unset_env", "load_deployment"):
        from . import _deployment as module
    elif name in ("Replan", "deployment_of"):
        from . import _redeploy as module  # type: ignore[no-redef]
    elif name == "forget_modules":
        from . import _resolve as module  # type: ignore[no-redef]
    elif name in (
        "DEFAULT_DEPLOYMENT",
        "Command",
        "CommandError",
        "add_deployment_argument",
        "deployment_file",
        "run_deployment_command",
    ):
        from . import _commands as module  # type: ignore[no-redef]
    elif name in ("EntryInfo", "validate_config"):
        from . import _config as module  # type: ignore[no-redef]
    elif name == "CheckReport":
        from . import _report as module  # type: ignore[no-redef]
    else:
        raise AttributeError(f"module 'dsh' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
