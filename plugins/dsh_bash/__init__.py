"""The bash seam: run shell commands through whichever executor is set.

YAML name ``bash``; service ``Bash`` at ctx key ``bash``. An executor plugin
(``bash-local``) sets the executor; the ``tool-bash`` tool and the ``jobs`` service
inject this seam. See this package's README for the contract.
"""

from __future__ import annotations

from ._capture import OutputSlice, SpillFolder, StreamCapture
from ._errors import BashArgumentError, BashError, BashSpawnError, BashUnavailableError
from ._service import Bash, BashConfig, BeforeRun
from ._types import (
    BashExecutor,
    BashRequest,
    BashResult,
    BashRun,
    BashSandbox,
    StreamOutput,
    join_parts,
    signal_name,
)

plugin = Bash

__all__ = [
    "Bash",
    "BashArgumentError",
    "BashConfig",
    "BashError",
    "BashExecutor",
    "BashRequest",
    "BashResult",
    "BashRun",
    "BashSandbox",
    "BashSpawnError",
    "BashUnavailableError",
    "BeforeRun",
    "OutputSlice",
    "SpillFolder",
    "StreamCapture",
    "StreamOutput",
    "join_parts",
    "plugin",
    "signal_name",
]
