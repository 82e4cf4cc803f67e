"""What a parsed entry gives the runtime when it starts: its config with the
environment's values in place of ``!env``, and the line of a config key (so a pydantic
error names where the value is written)."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from typing import Any

from yaml.nodes import MappingNode, SequenceNode

from dsh._errors import ConfigError

from ._yaml import EntrySpec, EnvRef, node_line

__all__ = ["line_of", "resolve_env"]


def resolve_env(value: Any, entry: EntrySpec, environ: Mapping[str, str] | None = None) -> Any:
    """A deep copy of ``value`` with every :class:`EnvRef` replaced by its value.

    A variable that is not set and has no default is a :class:`ConfigError`; all such
    variables in ``value`` are listed, one per line. An empty value counts as set.
    """
    env = os.environ if environ is None else environ
    missing: list[str] = []

    def walk(item: Any) -> Any:
        if isinstance(item, EnvRef):
            found = env.get(item.name, item.default)
            if found is None:
                missing.append(
                    f"{entry.file}:{item.line}: entry '{entry.id}': "
                    f"environment variable {item.name} is not set"
                )
            return found
        if isinstance(item, dict):
            return {key: walk(sub) for key, sub in item.items()}
        if isinstance(item, list | tuple):
            items = [walk(sub) for sub in item]
            return items if isinstance(item, list) else tuple(items)
        return copy.deepcopy(item)

    result = walk(value)
    if missing:
        raise ConfigError("\n".join(missing))
    return result


def line_of(entry: EntrySpec, loc: Sequence[str | int]) -> int:
    """The line of the deepest config node reached by following a pydantic ``loc``.

    Mapping steps report the key's line (where the name is written); list steps report the
    item's line. Without a config node this is the entry's line.
    """
    node = entry.config_node
    if node is None:
        return entry.line
    line = node_line(node)
    for step in loc:
        if isinstance(node, MappingNode):
            # Later pairs win, as in the built dict (merge keys come first).
            match = next(
                (pair for pair in reversed(node.value) if pair[0].value == str(step)), None
            )
            if match is None:
                break
            line, node = node_line(match[0]), match[1]
        elif (
            isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value)
        ):
            node = node.value[step]
            line = node_line(node)
        else:
            break
    return line
