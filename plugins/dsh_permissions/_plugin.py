"""The ``permissions`` plugin: rules from the config and the settings files decide
tool calls (a ``tool/before`` listener), and "always" answers become rules."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, DshError, Plugin
from dsh_agent import HookDecision

from ._command import split_command
from ._names import _cwd, call_path, claude_tool_name
from ._rules import KINDS, Rule, RuleSet, parse_rule
from ._settings import DSH_LOCAL_SETTINGS, SettingsError, add_rule, load_settings, project_dir
from ._settings import settings_files as find_settings

__all__ = ["Permissions", "PermissionsConfig", "always_rules", "rules_of_settings"]

_log = logging.getLogger("dsh.permissions")


class PermissionsConfig(BaseModel):
    """Config of the ``permissions`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: Rules in Claude Code's syntax; deny wins, then ask, then allow.
    allow: list[str] = []
    ask: list[str] = []
    deny: list[str] = []
    #: Also take the ``permissions`` of the settings files (``.claude/settings.json``,
    #: ``.claude/settings.local.json`` and ``.dsh/settings.local.json`` from the cwd
    #: up, and ``~/.claude/settings.json``).
    claude_settings: bool = True


def rules_of_settings(path: Path, data: dict[str, Any], project: Path) -> RuleSet:
    """The rules of one settings file's ``permissions`` key (``data`` is the file's
    object); raises :class:`SettingsError` naming the file and key for a wrong kind
    of value, and :class:`PermissionRuleError` for a rule that does not parse."""
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict):
        raise SettingsError(f'{path}: "permissions" must be an object')
    lists: list[tuple[Rule, ...]] = []
    for kind in KINDS:
        given = permissions.get(kind, [])
        if not isinstance(given, list):
            raise SettingsError(f'{path}: "permissions.{kind}" must be a list of rules')
        lists.append(
            tuple(
                parse_rule(text, f'{path}: "permissions.{kind}"[{i}]', str(project))
                for i, text in enumerate(given)
            )
        )
    return RuleSet(*lists)


def always_rules(call: Any) -> list[str]:
    """The allow rules an "always" answer about ``call`` persists: ``Bash(<command>)``
    for each command of its command line (exactly as written), ``<Tool>(//<path>)``
    for a file tool's path, ``WebFetch(domain:<host>)``, else the tool's Claude name."""
    name = claude_tool_name(call)
    if name == "Bash":
        command = call.input().get("command")
        parts = split_command(command) if isinstance(command, str) else []
        return [f"Bash({part})" for part in parts]
    path = call_path(call)
    if path is not None:
        return [f"{name}(/{path})"]
    url = call.input().get("url")
    host = urlsplit(url).hostname if name == "WebFetch" and isinstance(url, str) else None
    return [f"WebFetch(domain:{host})"] if host else [name]


class Permissions(Plugin):
    """Decides tool calls by permission rules (YAML ``permissions``)."""

    name = "permissions"
    Config = PermissionsConfig
    # The loop events are declared by the agent registry; ``approval/always`` by the
    # approval service, heard when it is loaded.
    inject = ("agents",)
    optional = ("approval",)

    def __init__(self, ctx: Context, config: PermissionsConfig) -> None:
        super().__init__(ctx, config)
        where = "the permissions plugin's config"
        self._configured = RuleSet(
            *(
                tuple(
                    parse_rule(text, f"{where}: {kind}[{i}]")
                    for i, text in enumerate(getattr(config, kind))
                )
                for kind in KINDS
            )
        )
        #: The rules in force per working directory (the settings files read once).
        self._by_cwd: dict[str, RuleSet] = {}
        #: The allow rules "always" answers gave in this session, with the project
        #: each applies to: in force at once, whatever is read from the files.
        self._learned: list[tuple[Path, RuleSet]] = []
        #: The ``tool/before`` listener's disposer, once a rule can cover a call.
        self._listening: Disposer | None = None

    def setup(self) -> Iterator[Callable[[], object]]:
        ctx = self.ctx
        # The settings of the directory the deployment runs in are read now: a bad
        # file fails the start, naming itself.
        self.rules_for(os.getcwd())
        if self._configured or self.config.claude_settings:
            # Without settings files and configured rules no rule can cover a call
            # until an "always" answer gives one: no listener till then, so the call
            # path stays as without the plugin.
            yield self._listen()
        if ctx.get("approval") is not None:
            yield ctx.on("approval/always", self.remember)
        yield self._by_cwd.clear

    def rules_for(self, cwd: str) -> RuleSet:
        """The rules in force for work in ``cwd``: the config's, then (with
        ``claude_settings``) those of each settings file :func:`settings_files` finds."""
        rules = self._by_cwd.get(cwd)
        if rules is None:
            sets = [self._configured]
            if self.config.claude_settings:
                for found in find_settings(cwd):
                    data = load_settings(found.path)
                    sets.append(rules_of_settings(found.path, data, found.project))
            where = Path(os.path.abspath(cwd))
            sets += [learned for project, learned in self._learned if where.is_relative_to(project)]
            rules = self._by_cwd[cwd] = RuleSet.of(sets)
        return rules

    def _listen(self) -> Disposer:
        if self._listening is None:
            self._listening = self.ctx.on("tool/before", self.before)
        return self._listening

    def before(self, call: Any) -> HookDecision | None:
        """The ``tool/before`` listener: the decision of the first rule that covers
        ``call`` (deny, then ask, then allow), None when none does."""
        decided = self.rules_for(_cwd(call)).decide(call)
        if decided is None:
            return None
        kind, rule = decided
        verb = {"deny": "denied by", "ask": "asked by", "allow": "allowed by"}[kind]
        return HookDecision(kind, f'{verb} the permission rule "{rule.text}" ({rule.source})')

    def remember(self, request: Any) -> None:
        """The ``approval/always`` listener: persist the rules of
        :func:`always_rules` to the project's ``.dsh/settings.local.json``; they apply
        at once in this session, in every mode (with ``claude_settings: false`` too). A
        file that cannot be updated is logged (the answer still stands)."""
        call = request.call
        if not getattr(call, "name", ""):
            return
        project = project_dir(_cwd(call))
        target = project / DSH_LOCAL_SETTINGS
        texts = always_rules(call)
        try:
            source = f'{target}: "permissions.allow"'
            rules = tuple(parse_rule(text, source, str(project)) for text in texts)
            self._learned.append((project, RuleSet(allow=rules)))
            self._listen()
            for text in texts:
                add_rule(target, "allow", text)
        except DshError as exc:  # SettingsError, or a rule that does not parse
            _log.error("could not remember the answer about %s: %s", request.title, exc)
        self._by_cwd.clear()
