"""Permission rules in Claude Code's syntax, and how a set of them decides a call."""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pathspec import GitIgnoreSpec

from dsh import DshError

from ._command import has_substitution, split_command
from ._names import _cwd, call_path, claude_tool_name

__all__ = ["KINDS", "PermissionRuleError", "Rule", "RuleSet", "parse_rule"]

_log = logging.getLogger("dsh.permissions")

#: The rule lists, in the order they are looked at: deny wins, then ask, then allow.
KINDS = ("deny", "ask", "allow")

_RULE = re.compile(r"(?P<tool>[A-Za-z0-9_*-]+)(?:\((?P<spec>.*)\))?", re.DOTALL)
_WORD = re.compile(r"[A-Za-z0-9_]")

#: The Claude tools a path rule of each tool covers (``Read`` rules also guard what
#: ``Glob`` and ``Grep`` search, ``Edit`` rules every tool that changes a file).
_PATH_TOOLS = {
    "Read": frozenset({"Read", "Glob", "Grep"}),
    "Edit": frozenset({"Edit", "Write"}),
    "Write": frozenset({"Write"}),
    "Glob": frozenset({"Glob"}),
    "Grep": frozenset({"Grep"}),
}


class PermissionRuleError(DshError, ValueError):
    """A permission rule is not in Claude Code's syntax (``Tool`` or
    ``Tool(specifier)``); the message names the rule and where it was written."""

    code = "PERMISSION_RULE"


def _command_matcher(spec: str) -> re.Pattern[str] | None:
    """A regex for a ``Bash`` specifier with ``*`` wildcards (None: no wildcard). A
    single trailing ``" *"`` also matches nothing (``ls *`` matches ``ls``). A
    ``prefix:*`` specifier is a prefix, not a wildcard."""
    if "*" not in spec or spec.endswith(":*"):
        return None
    if spec.endswith(" *") and spec.count("*") == 1:
        return re.compile(re.escape(spec[:-2]) + r"(?:\s.*)?", re.DOTALL)
    return re.compile(".*".join(re.escape(piece) for piece in spec.split("*")), re.DOTALL)


def _path_pattern(spec: str) -> tuple[str, str]:
    """(where the pattern is relative to, the gitignore pattern): ``"/"`` for
    ``//abs``, ``"~"`` for ``~/p``, ``"project"`` for ``/p`` (the settings file's
    project), ``"cwd"`` for ``./p`` and ``p`` (the calling agent's directory)."""
    if spec.startswith("//"):
        return "/", spec[1:]
    if spec.startswith("~/"):
        return "~", spec[1:]
    if spec.startswith("/"):
        return "project", spec
    if spec.startswith("./"):
        return "cwd", spec[1:]
    return "cwd", spec


@dataclass(frozen=True, eq=False)
class Rule:
    """One rule: ``text`` as written, the Claude ``tool`` it names, its ``spec``
    (None for a bare tool name), ``source`` (where it was written, for messages) and
    ``project`` (the directory ``/path`` patterns are relative to; None: the calling
    agent's directory)."""

    text: str
    tool: str
    spec: str | None
    source: str
    project: str | None = None
    _wildcard: re.Pattern[str] | None = field(default=None, repr=False)
    _paths: tuple[str, GitIgnoreSpec] | None = field(default=None, repr=False)

    @property
    def is_bash(self) -> bool:
        return self.tool == "Bash"

    def matches(self, call: Any, name: str) -> bool:
        """Whether the rule covers ``call`` (whose Claude name is ``name``); a Bash
        rule with a specifier is matched per command by :meth:`matches_command`."""
        tool, spec = self.tool, self.spec
        if tool.startswith("mcp__"):
            return spec is None and _mcp_matches(tool, name)
        if spec is None:
            return tool == name
        if self._paths is not None:
            return name in _PATH_TOOLS[tool] and self._path_matches(call)
        if tool == "WebFetch" and name == "WebFetch" and spec.startswith("domain:"):
            return _domain_matches(spec[len("domain:") :], call.input().get("url"))
        return False

    def matches_command(self, command: str) -> bool:
        """Whether this Bash rule covers one command (a part of a command line)."""
        spec = self.spec
        if spec is None:
            return True
        if self._wildcard is not None:
            return self._wildcard.fullmatch(command) is not None
        if spec.endswith(":*"):
            prefix = spec[:-2]
            if not command.startswith(prefix):
                return False
            rest = command[len(prefix) :]
            return not rest or not prefix or not _WORD.match(rest[0]) or not _WORD.match(prefix[-1])
        return command == spec

    def _path_matches(self, call: Any) -> bool:
        assert self._paths is not None
        where, spec = self._paths
        target = call_path(call)
        if target is None:
            return False
        if where == "/":
            base = os.sep
        elif where == "~":
            base = os.path.expanduser("~")
        elif where == "project" and self.project is not None:
            base = self.project
        else:
            base = _cwd(call)
        relative = os.path.relpath(target, base)
        if relative == os.curdir or relative.startswith(os.pardir):
            return False
        return spec.match_file(relative)


def _mcp_matches(tool: str, name: str) -> bool:
    if tool.endswith("__*"):
        tool = tool[:-3]
    if tool.count("__") == 1:  # mcp__server: every tool of the server
        return name.startswith(tool + "__")
    return name == tool


def _domain_matches(domain: str, url: object) -> bool:
    if not isinstance(url, str):
        return False
    host = urlsplit(url).hostname
    if host is None:
        return False
    return fnmatch.fnmatchcase(host, domain.lower()) if "*" in domain else host == domain.lower()


def parse_rule(text: object, source: str, project: str | None = None) -> Rule:
    """The :class:`Rule` ``text`` writes; raises :class:`PermissionRuleError` naming
    the rule and ``source`` when it is not ``Tool`` or ``Tool(specifier)``. A
    specifier this plugin does not understand makes a rule that matches nothing (a
    warning names it)."""
    if not isinstance(text, str):
        raise PermissionRuleError(
            f"{source}: a permission rule must be a string, got {type(text).__name__}"
        )
    found = _RULE.fullmatch(text.strip())
    if found is None:
        raise PermissionRuleError(
            f'{source}: "{text}" is not a permission rule: write Tool or Tool(specifier), '
            'for example "Bash(npm run test:*)" or "Read(./src/**)"'
        )
    tool, spec = found["tool"], found["spec"]
    if spec is not None:
        spec = spec.strip()
        if not spec:
            raise PermissionRuleError(f'{source}: "{text}" has an empty specifier')
    wildcard = paths = None
    if spec is not None and tool == "Bash":
        wildcard = _command_matcher(spec)
    elif spec is not None and tool in _PATH_TOOLS:
        where, pattern = _path_pattern(spec)
        paths = (where, GitIgnoreSpec.from_lines([pattern]))
    elif spec is not None and not (tool == "WebFetch" and spec.startswith("domain:")):
        _log.warning(
            '%s: the permission rule "%s" has a specifier dsh does not match; it matches nothing',
            source,
            text,
        )
    return Rule(text.strip(), tool, spec, source, project, wildcard, paths)


@dataclass(frozen=True)
class RuleSet:
    """The ``deny``, ``ask`` and ``allow`` rules in force for some work."""

    deny: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    allow: tuple[Rule, ...] = ()

    @classmethod
    def of(cls, sets: Iterable[RuleSet]) -> RuleSet:
        sets = list(sets)
        return cls(*(tuple(rule for s in sets for rule in getattr(s, kind)) for kind in KINDS))

    def __bool__(self) -> bool:
        return bool(self.deny or self.ask or self.allow)

    def decide(self, call: Any) -> tuple[str, Rule] | None:
        """(``"deny"``/``"ask"``/``"allow"``, the rule that decided) for ``call``, or
        None when no rule covers it. Deny wins, then ask, then allow. A command line
        (``Bash``) is denied or asked about when one of its commands is, and allowed
        only when every one of them is (by the same rule or several); a command that
        runs another inside it (``$(…)``, backticks) is allowed only by a bare
        ``Bash`` rule."""
        name = claude_tool_name(call)
        if name == "Bash":
            command = call.input().get("command")
            return self._decide_bash(split_command(command) if isinstance(command, str) else [])
        for kind in KINDS:
            for rule in getattr(self, kind):
                if rule.matches(call, name):
                    return kind, rule
        return None

    def _decide_bash(self, parts: list[str]) -> tuple[str, Rule] | None:
        for kind in ("deny", "ask"):
            rule = _first_bash(getattr(self, kind), parts)
            if rule is not None:
                return kind, rule
        rule = _first_bash(self.allow, [])  # a bare Bash
        if rule is not None:
            return "allow", rule
        allowed = [_first_bash(self.allow, [part]) for part in parts if not has_substitution(part)]
        first = allowed[0] if allowed else None
        if first is not None and len(allowed) == len(parts) and all(allowed):
            return "allow", first
        return None


def _first_bash(rules: tuple[Rule, ...], parts: list[str]) -> Rule | None:
    """The first Bash rule of ``rules`` covering one of ``parts`` (a bare ``Bash``
    covers every command line, even one with no command in it)."""
    for rule in rules:
        if rule.is_bash and (any(map(rule.matches_command, parts)) or rule.spec is None):
            return rule
    return None
