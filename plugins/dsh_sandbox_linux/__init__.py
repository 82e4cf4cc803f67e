"""The Linux sandbox: bubblewrap when usable, else Landlock, behind the ``sandbox`` seam.

YAML name ``sandbox-linux``; it sets itself as the ``sandbox`` seam's mechanism. See
this package's README and ``docs/rfc/0034-sandbox-linux.md``.
"""

from __future__ import annotations

from ._config import SandboxLinuxConfig
from ._paths import SCAN_LIMIT, denied_paths
from ._plugin import SandboxLinux

plugin = SandboxLinux

__all__ = ["SCAN_LIMIT", "SandboxLinux", "SandboxLinuxConfig", "denied_paths", "plugin"]
