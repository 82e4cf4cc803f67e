"""Permission rules in Claude Code's syntax decide tool calls (RFC 0036).

YAML name ``permissions``: ``allow`` / ``ask`` / ``deny`` rule lists (also read from the
settings files' ``permissions`` key), applied as a ``tool/before`` listener; "always"
answers persist rules to ``.dsh/settings.local.json``. The Claude Code tool names
(:func:`claude_tool_name`, :func:`claude_tool_input`) and the settings files
(:func:`settings_files`, :func:`load_settings`) are public for ``dsh_hooks``. See the
README.
"""

from __future__ import annotations

from ._command import has_substitution, split_command
from ._names import CLAUDE_TOOL_NAMES, call_path, claude_tool_input, claude_tool_name
from ._plugin import Permissions, PermissionsConfig, always_rules, rules_of_settings
from ._rules import PermissionRuleError, Rule, RuleSet, parse_rule
from ._settings import (
    DSH_LOCAL_SETTINGS,
    SettingsError,
    SettingsFile,
    add_rule,
    load_settings,
    project_dir,
    settings_files,
)

plugin = Permissions

__all__ = [
    "CLAUDE_TOOL_NAMES",
    "DSH_LOCAL_SETTINGS",
    "PermissionRuleError",
    "Permissions",
    "PermissionsConfig",
    "Rule",
    "RuleSet",
    "SettingsError",
    "SettingsFile",
    "add_rule",
    "always_rules",
    "call_path",
    "claude_tool_input",
    "claude_tool_name",
    "has_substitution",
    "load_settings",
    "parse_rule",
    "plugin",
    "project_dir",
    "rules_of_settings",
    "settings_files",
    "split_command",
]
