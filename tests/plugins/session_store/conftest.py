"""The ``store`` fixture: every test of this directory runs against each backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.session_store.store_support import STORES, Store


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A backend storing under ``tmp_path / "store"``."""
    return STORES[request.param](tmp_path / "store")
