"""Amending a stored session's header: ``session/meta`` records folded into its meta.

A header is written once, when its session is created. What is learnt about a session
later (that it was rewound into another, say) is appended to its log as a
``session/meta`` record, ``{session, meta}``: a patch of the header's ``meta`` (its
keys replace those of the header) for the session ``session``. Every reader of a
stored header folds the session's patches into it, in order (RFC 0038, addendum).
A patch names its session, so a record copied into another session's log (the seed
of a rewind) does not amend that one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ._event import SessionError, SessionEvent
from ._session import SessionHeader

__all__ = ["META_EVENT", "checked_patch", "fold_meta"]

#: The record type of an amendment of the header's meta: ``{session, meta}``.
META_EVENT = "session/meta"


def checked_patch(session_id: str, patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` as a dict, when it is a non-empty mapping of string keys to JSON data;
    else :class:`SessionError` naming the session and what is wrong."""
    given: object = patch  # callers may hand anything
    if not isinstance(given, Mapping) or not given:
        raise SessionError(
            f'the meta patch of session "{session_id}" must be a non-empty mapping, got {patch!r}'
        )
    checked = dict(patch)
    for key in checked:
        if not isinstance(key, str):
            raise SessionError(
                f'the meta patch of session "{session_id}" has a key that is not a string: {key!r}'
            )
    try:
        json.dumps(checked, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SessionError(
            f'the meta patch of session "{session_id}" is not JSON data ({exc})'
        ) from None
    return checked


def fold_meta(header: SessionHeader, records: Iterable[object]) -> SessionHeader:
    """``header`` with the ``session/meta`` patches of ``records`` that name it folded
    into its meta, in order (``header`` itself when there are none). Other records,
    and a patch whose ``meta`` is not an object, are passed over."""
    meta: dict[str, Any] | None = None
    for record in records:
        if not isinstance(record, SessionEvent) or record.type != META_EVENT:
            continue
        data = record.data
        patch = data.get("meta")
        if data.get("session") != header.id or not isinstance(patch, dict):
            continue
        meta = {**(header.meta if meta is None else meta), **patch}
    return header if meta is None else replace(header, meta=meta)
