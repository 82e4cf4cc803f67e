"""Splitting a shell command line into the commands a rule is matched against."""

from __future__ import annotations

__all__ = ["has_substitution", "split_command"]

#: Operators that separate commands (longest first).
_OPERATORS = ("&&", "||", "|&", ";;", ";", "|", "&", "\n")


def split_command(command: str) -> list[str]:
    """The commands of a command line, as written (stripped): split at the control
    operators ``&&``, ``||``, ``;``, ``|``, ``|&``, ``&`` and newlines that are outside
    quotes and not escaped (``2>&1``, ``&>`` and ``>&`` are redirections, not
    operators). Empty parts are left out."""
    parts: list[str] = []
    start = i = 0
    quote = ""
    size = len(command)
    while i < size:
        char = command[i]
        if quote:
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"':
                i += 1
            i += 1
            continue
        if char in "'\"":
            quote = char
            i += 1
            continue
        if char == "\\":
            i += 2
            continue
        operator = next((op for op in _OPERATORS if command.startswith(op, i)), None)
        redirection = char == "&" and (
            (i > 0 and command[i - 1] in "<>") or command.startswith(">", i + 1)
        )
        if operator is None or redirection:
            i += 1
            continue
        parts.append(command[start:i])
        i += len(operator)
        start = i
    parts.append(command[start:])
    return [part.strip() for part in parts if part.strip()]


def has_substitution(command: str) -> bool:
    """Whether ``command`` runs another command inside it: ``$(…)``, backticks,
    ``<(…)`` or ``>(…)`` outside single quotes."""
    quote = ""
    for i, char in enumerate(command):
        if quote == "'":
            if char == "'":
                quote = ""
            continue
        if char == "'" and not quote:
            quote = "'"
        elif char == '"':
            quote = "" if quote else '"'
        elif char == "`" or (char == "(" and i > 0 and command[i - 1] in "$<>"):
            return True
    return False
