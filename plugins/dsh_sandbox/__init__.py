"""The sandbox seam: how an executor starts a command the kernel confines.

YAML name ``sandbox``; service ``Sandbox`` at ctx key ``sandbox``. A mechanism plugin
(``sandbox-linux``) sets the mechanism; executors (``bash-local``, ``jobs``) ask
``wrap(policy)`` for a :class:`Launch` and apply it to the process they start. See this
package's README for the contract.
"""

from __future__ import annotations

from ._errors import SandboxError, SandboxUnavailableError
from ._service import Sandbox, SandboxConfig
from ._types import MODES, Launch, SandboxMechanism, SandboxMode, SandboxPolicy

plugin = Sandbox

__all__ = [
    "MODES",
    "Launch",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxMechanism",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxUnavailableError",
    "plugin",
]
