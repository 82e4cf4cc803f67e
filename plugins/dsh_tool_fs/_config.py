"""Config of the ``tool-fs`` plugin."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, PositiveInt

__all__ = ["ToolFsConfig"]


class ToolFsConfig(BaseModel):
    """Config of the ``tool-fs`` plugin (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    #: The most lines one ``read`` returns (and how many it returns by default).
    read_limit: PositiveInt = 2000
    #: Longer lines are cut to this many characters (``read``, and ``grep`` lines).
    read_max_line_length: PositiveInt = 2000
    #: The most bytes of numbered lines one ``read`` returns.
    read_max_bytes: PositiveInt = 51200
