"""Python calls counted by code object: unlike cProfile, which keys functions by file,
line and name, this tells apart the ``__init__`` that ``dataclasses`` makes for each
class (all of them ``<string>:2(__init__)`` to cProfile)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from types import CodeType, FrameType
from typing import Any

__all__ = ["count_calls", "label"]


def label(code: CodeType, owner: str | None) -> str:
    """A code object's name: its class for a generated ``__init__``, else where it is."""
    if code.co_filename == "<string>" and owner is not None:
        return f"{owner}.{code.co_name} (generated)"
    return f"{code.co_filename}:{code.co_firstlineno}({code.co_qualname})"


async def count_calls(run: Callable[[], Awaitable[object]]) -> tuple[Counter[str], int]:
    """The Python calls ``run()`` makes, by function (generated ``__init__`` s by the
    class of their ``self``), and the calls of built-in functions."""
    by_code: Counter[tuple[CodeType, str | None]] = Counter()
    builtin = [0]

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            owner = None
            if code.co_filename == "<string>" and "self" in frame.f_locals:
                owner = type(frame.f_locals["self"]).__qualname__
            by_code[code, owner] += 1
        elif event == "c_call":
            builtin[0] += 1

    sys.setprofile(hook)
    try:
        await run()
    finally:
        sys.setprofile(None)
    counts: Counter[str] = Counter()
    for (code, owner), n in by_code.items():
        counts[label(code, owner)] += n
    return counts, builtin[0]
