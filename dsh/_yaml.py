"""Reading deployment files into entry specs that remember where they came from.

A deployment is a YAML list of entries. The file is composed into PyYAML nodes with a
``SafeLoader`` subclass and the Python values are built here from those nodes, so every
entry keeps its line, every config keeps its node (to map pydantic error locations back to
lines), and ``!env`` stays a placeholder until the entry is actually started.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from dsh._errors import DeploymentError
from dsh._record import record

__all__ = [
    "EntrySpec",
    "EnvRef",
    "deployment_error",
    "node_line",
    "parse_deployment",
]

_CORE = "tag:yaml.org,2002:"
_MAP = _CORE + "map"
_SEQ = _CORE + "seq"
_STR = _CORE + "str"
_NULL = _CORE + "null"
_BOOL = _CORE + "bool"
_MERGE = _CORE + "merge"
_VALUE = _CORE + "value"
_ENV = "!env"
# Scalar tags we build: SafeLoader's safe constructors (hashable, plain values) and "=".
_SCALAR_TAGS = frozenset(
    _CORE + kind for kind in ("null", "bool", "int", "float", "str", "binary", "timestamp", "value")
)
_ENTRY_KEYS = ("config", "disabled", "group", "id", "name")
#: The most values one entry's config may hold once its aliases are expanded. Aliases
#: nest, so a few hundred bytes can stand for billions of values (an "alias bomb");
#: everything downstream (``!env`` resolution, validation, the plugin) sees the
#: expanded value, so the size is checked on the nodes before anything is built.
MAX_CONFIG_VALUES = 100_000
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@record
class EnvRef:
    """A ``!env NAME`` or ``!env [NAME, default]`` placeholder, evaluated at start time."""

    name: str
    default: str | None
    line: int


@dataclass
class EntrySpec:
    """One entry of a deployment file, as written (``config`` may hold :class:`EnvRef`)."""

    id: str
    name: str | None
    config: Any
    disabled: bool
    group: bool
    children: list[EntrySpec]
    file: Path
    line: int
    config_node: Node | None = None

    @property
    def where(self) -> str:
        """``<file>:<line>: entry '<id>'``, the prefix of every message about this entry."""
        return f"{self.file}:{self.line}: entry '{self.id}'"


class _Loader(yaml.SafeLoader):
    """The loader used for deployments: safe scalars only; ``!env`` is handled by us."""


def node_line(node: Node) -> int:
    """The (1-based) line a node starts on."""
    return int(node.start_mark.line) + 1


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag


def _kind(node: Node) -> str:
    """Describe a node for a "found ..." message."""
    if node.tag not in _SCALAR_TAGS and node.tag not in (_MAP, _SEQ):
        return f"a value tagged {_short_tag(node.tag)}"
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    if node.tag == _NULL:
        return "null"
    if node.tag == _STR:
        return repr(node.value)
    return f"{node.value} ({node.tag.removeprefix(_CORE)})"


def _plain_string(node: Node | None) -> str | None:
    """The text of a non-empty plain string scalar, else None."""
    if isinstance(node, ScalarNode) and node.tag == _STR and node.value:
        return str(node.value)
    return None


class _Parser:
    """Walks the composed document, collecting every problem instead of stopping."""

    def __init__(self, path: Path, loader: _Loader) -> None:
        self.path = path
        self.loader = loader
        self.problems: list[tuple[int, str]] = []
        self.ids: dict[str, int] = {}
        # Built values and flattened mapping pairs, keyed by node identity: an alias
        # yields the same node twice and must neither be rebuilt nor re-reported.
        self.values: dict[int, Any] = {}
        self.building: set[int] = set()
        self.flattened: dict[int, list[tuple[Node, Node]]] = {}
        # Expanded sizes by node identity, so that measuring costs one visit per node.
        self.sizes: dict[int, int] = {}

    def fail(self, line: int, owner: str | None, problem: str) -> None:
        entry = f" entry '{owner}':" if owner is not None else ""
        self.problems.append((line, f"{self.path}:{line}:{entry} {problem}"))

    # -- structure ----------------------------------------------------------------------

    def document(self, root: Node | None) -> list[EntrySpec]:
        if root is None or (isinstance(root, ScalarNode) and root.tag == _NULL):
            return []
        if not isinstance(root, SequenceNode) or root.tag != _SEQ:
            self.fail(
                node_line(root),
                None,
                f"a deployment must be a list of entries, found {_kind(root)}",
            )
            return []
        return self.entries(root)

    def entries(self, node: SequenceNode) -> list[EntrySpec]:
        specs = []
        for item in node.value:
            spec = self.entry(item)
            if spec is not None:
                specs.append(spec)
        return specs

    def entry(self, node: Node) -> EntrySpec | None:
        line = node_line(node)
        if not isinstance(node, MappingNode) or node.tag != _MAP:
            self.fail(line, None, f"an entry must be a mapping, found {_kind(node)}")
            return None
        pairs, pair_problems = self.pairs(node)
        fields: dict[str, Node] = {}
        strays: list[Node] = []
        for key, value in pairs:
            if isinstance(key, ScalarNode) and key.tag == _STR and key.value in _ENTRY_KEYS:
                fields[key.value] = value
            else:
                strays.append(key)

        # Settle the id first, without reporting anything, so every message names it.
        is_group = self.flag(fields.get("group")) is True
        explicit_id = _plain_string(fields.get("id"))
        name = _plain_string(fields.get("name"))
        entry_id = explicit_id or f"{'group' if is_group else name or 'entry'}@{line}"

        for problem_line, problem in pair_problems:
            self.fail(problem_line, entry_id, problem)
        for key in strays:
            what = repr(key.value) if isinstance(key, ScalarNode) else _kind(key)
            expected = ", ".join(_ENTRY_KEYS)
            self.fail(node_line(key), entry_id, f"unknown key {what} (expected one of: {expected})")
        self.check_id(fields.get("id"), explicit_id, entry_id, line)
        self.check_name(fields.get("name"), name, is_group, entry_id, line)
        disabled = self.check_flag(fields.get("disabled"), "disabled", entry_id)
        self.check_flag(fields.get("group"), "group", entry_id)

        config_node = fields.get("config")
        config: Any = None
        children: list[EntrySpec] = []
        if is_group:
            children = self.group_children(config_node, entry_id)
        elif config_node is not None:
            size = self.expanded_size(config_node)
            if size > MAX_CONFIG_VALUES:
                self.fail(
                    node_line(config_node),
                    entry_id,
                    f"the config holds more than {MAX_CONFIG_VALUES} values once its "
                    "aliases are expanded; share less through aliases",
                )
            else:
                config = self.build(config_node, entry_id)
        return EntrySpec(
            id=entry_id,
            name=None if is_group else name,
            config=config,
            disabled=disabled,
            group=is_group,
            children=children,
            file=self.path,
            line=line,
            config_node=config_node,
        )

    def check_id(self, node: Node | None, explicit: str | None, entry_id: str, line: int) -> None:
        if node is not None and explicit is None:
            self.fail(
                node_line(node), entry_id, f"id must be a non-empty string, found {_kind(node)}"
            )
        if entry_id in self.ids:
            self.fail(line, entry_id, f"duplicate id (first used at line {self.ids[entry_id]})")
        else:
            self.ids[entry_id] = line

    def check_name(
        self, node: Node | None, name: str | None, is_group: bool, entry_id: str, line: int
    ) -> None:
        if node is None:
            if not is_group:
                self.fail(line, entry_id, "missing required key 'name' (or 'group: true')")
        elif is_group:
            self.fail(node_line(node), entry_id, "a group takes no name")
        elif name is None:
            self.fail(
                node_line(node), entry_id, f"name must be a non-empty string, found {_kind(node)}"
            )

    def check_flag(self, node: Node | None, field: str, entry_id: str) -> bool:
        if node is None:
            return False
        flag = self.flag(node)
        if flag is None:
            self.fail(
                node_line(node), entry_id, f"{field} must be true or false, found {_kind(node)}"
            )
        return flag is True

    def group_children(self, node: Node | None, entry_id: str) -> list[EntrySpec]:
        if isinstance(node, SequenceNode) and node.tag == _SEQ:
            return self.entries(node)
        if node is not None and node.tag != _NULL:
            self.fail(
                node_line(node),
                entry_id,
                f"a group's config must be a list of entries, found {_kind(node)}",
            )
        return []

    def flag(self, node: Node | None) -> bool | None:
        if isinstance(node, ScalarNode) and node.tag == _BOOL:
            # An explicit ``!!bool`` may carry any text; look it up rather than construct.
            flag = self.loader.bool_values.get(str(node.value).lower())
            return bool(flag) if flag is not None else None
        return None

    def pairs(self, node: MappingNode) -> tuple[list[tuple[Node, Node]], list[tuple[int, str]]]:
        """A mapping's key/value nodes with merge keys applied, and the problems found.

        The node itself is rewritten to the merged pairs (as PyYAML's own constructor
        does), so :func:`line_of` can later search it directly. Problems are returned
        only the first time a node is seen.
        """
        known = self.flattened.get(id(node))
        if known is not None:
            return known, []
        self.flattened[id(node)] = []  # a mapping merged into itself contributes nothing
        problems: list[tuple[int, str]] = []
        merged: list[tuple[Node, Node]] = []
        own: list[tuple[Node, Node]] = []
        seen: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.tag == _MERGE:
                sources = value.value if isinstance(value, SequenceNode) else [value]
                # Earlier sources win, and the mapping's own keys win over all of them.
                for source in reversed(sources):
                    if isinstance(source, MappingNode) and source.tag == _MAP:
                        source_pairs, source_problems = self.pairs(source)
                        merged.extend(source_pairs)
                        problems.extend(source_problems)
                    else:
                        problems.append(
                            (
                                node_line(source),
                                f"'<<' merges a mapping or a list of mappings, "
                                f"found {_kind(source)}",
                            )
                        )
                continue
            own.append((key, value))
            if isinstance(key, ScalarNode):
                signature = (key.tag, key.value)
                if signature in seen:
                    problems.append(
                        (
                            node_line(key),
                            f"duplicate key {key.value!r} (first at line {seen[signature]})",
                        )
                    )
                else:
                    seen[signature] = node_line(key)
        node.value = merged + own
        self.flattened[id(node)] = node.value
        return node.value, problems

    # -- values -------------------------------------------------------------------------

    def expanded_size(self, node: Node) -> int:
        """How many values ``node`` stands for with every alias expanded (a node met
        again inside itself counts once: building reports the recursion)."""
        key = id(node)
        known = self.sizes.get(key)
        if known is not None:
            return known
        self.sizes[key] = 1
        size = 1
        if isinstance(node, SequenceNode):
            size += sum(self.expanded_size(item) for item in node.value)
        elif isinstance(node, MappingNode):
            size += sum(self.expanded_size(v) for k, v in node.value)
        self.sizes[key] = size = min(size, MAX_CONFIG_VALUES + 1)
        return size

    def build(self, node: Node, owner: str) -> Any:
        """The Python value of a config node; problems are recorded, not raised."""
        key = id(node)
        if key in self.values:
            return self.values[key]
        if key in self.building:
            self.fail(node_line(node), owner, "a recursive alias is not allowed")
            return None
        value: Any = None
        if node.tag == _ENV:
            value = self.env(node, owner)
        elif isinstance(node, ScalarNode) and node.tag in _SCALAR_TAGS:
            value = self.scalar(node, owner)
        elif isinstance(node, SequenceNode) and node.tag == _SEQ:
            self.building.add(key)
            value = [self.build(item, owner) for item in node.value]
            self.building.discard(key)
        elif isinstance(node, MappingNode) and node.tag == _MAP:
            self.building.add(key)
            value = {}
            pairs, problems = self.pairs(node)
            for problem_line, problem in problems:
                self.fail(problem_line, owner, problem)
            for key_node, value_node in pairs:
                if isinstance(key_node, ScalarNode) and key_node.tag in _SCALAR_TAGS:
                    value[self.build(key_node, owner)] = self.build(value_node, owner)
                else:
                    self.fail(
                        node_line(key_node),
                        owner,
                        f"a mapping key must be a plain scalar, found {_kind(key_node)}",
                    )
            self.building.discard(key)
        else:
            self.fail(node_line(node), owner, f"unsupported tag {_short_tag(node.tag)}")
        self.values[key] = value
        return value

    def scalar(self, node: ScalarNode, owner: str) -> Any:
        if node.tag == _VALUE:
            return str(node.value)  # a lone "=", which SafeLoader cannot construct
        try:
            return self.loader.construct_object(node)
        except (yaml.YAMLError, ValueError, LookupError, AttributeError, TypeError):
            # An explicit tag on text that does not fit it, such as ``!!int abc``.
            self.fail(
                node_line(node), owner, f"invalid {_short_tag(node.tag)} value {node.value!r}"
            )
            return None

    def env(self, node: Node, owner: str) -> EnvRef | None:
        line = node_line(node)
        if isinstance(node, ScalarNode):
            parts = [node]
        elif (
            isinstance(node, SequenceNode)
            and len(node.value) == 2
            and all(isinstance(n, ScalarNode) and n.tag in _SCALAR_TAGS for n in node.value)
        ):
            parts = node.value
        else:
            self.fail(line, owner, "!env takes a variable name or a [NAME, default] pair")
            return None
        ok = True
        name = str(parts[0].value)
        if not _ENV_NAME.fullmatch(name):
            self.fail(line, owner, f"!env: {name!r} is not a valid environment variable name")
            ok = False
        default: str | None = None
        if len(parts) == 2:
            if parts[1].tag == _NULL:
                self.fail(line, owner, "!env: the default must not be null (use '' for empty)")
                ok = False
            default = str(parts[1].value)
        return EnvRef(name, default, line) if ok else None


def deployment_error(
    path: Path, failures: list[str], kind: type[DeploymentError] = DeploymentError
) -> DeploymentError:
    """One error (a ``kind``) listing every failure of the deployment at ``path``, a
    line each."""
    count = f"{len(failures)} problem{'s' if len(failures) != 1 else ''}"
    return kind("\n".join([f"deployment {path} has {count}:", *failures]), failures)


def _raise(path: Path, problems: list[tuple[int, str]]) -> NoReturn:
    raise deployment_error(path, [text for _, text in sorted(problems, key=lambda p: p[0])])


def parse_deployment(
    path: Path, memo: dict[bytes, list[EntrySpec]] | None = None
) -> list[EntrySpec]:
    """Parse a deployment file into entry specs.

    Every structural problem in the file is collected and reported in one
    :class:`DeploymentError`; ``!env`` values are left as :class:`EnvRef` placeholders.
    With ``memo`` (a reloading deployment's), a file whose bytes are those it parsed
    last time gives the same entry specs without being parsed again.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        _raise(path, [(0, f"{path}: cannot read the file: {exc.strerror or exc}")])
    if memo is not None and data in memo:
        return memo[data]
    specs = _parse(path, data)
    if memo is not None:
        memo.clear()
        memo[data] = specs
    return specs


def _parse(path: Path, data: bytes) -> list[EntrySpec]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        _raise(path, [(line, f"{path}:{line}: the file is not valid UTF-8 ({exc.reason})")])
    try:
        loader = _Loader(text)
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        detail = ", ".join(str(part) for part in (exc.context, exc.problem) if part)
        _raise(path, [(0, f"{where}: invalid YAML: {detail}")])
    except ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        problem = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
        _raise(path, [(line, f"{path}:{line}: invalid YAML: {problem}")])
    parser = _Parser(path, loader)
    specs = parser.document(root)
    loader.dispose()
    if parser.problems:
        _raise(path, parser.problems)
    return specs
