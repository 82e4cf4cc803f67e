"""The faster ``__init__`` of the frozen slotted dataclasses a model step makes: now
:func:`dsh._record.fast_init`, which :func:`dsh._record.record` gives every record it
makes (kept here for the dataclasses that still apply it themselves)."""

from __future__ import annotations

from dsh._record import fast_init

__all__ = ["fast_init"]
