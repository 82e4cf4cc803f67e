"""``dsh_session`` imports a store plugin's base, the store directory helpers and the
session descriptions on first use (RFC 0055); every public name still resolves."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dsh_session

#: The modules behind the lazy names.
LAZY = ("dsh_session._describe", "dsh_session._paths", "dsh_session._store_plugin")


def test_importing_the_package_leaves_the_store_helpers_alone() -> None:
    code = f"import sys, dsh_session; print(sorted(set({LAZY!r}) & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"


def test_every_public_name_resolves_and_an_unknown_one_is_an_attribute_error() -> None:
    for name in dsh_session.__all__:
        assert getattr(dsh_session, name) is not None, name
    from dsh_session._store_plugin import StorePlugin

    assert dsh_session.StorePlugin is StorePlugin
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = dsh_session.nothing
