"""The hot-reload tests import plugin files from their temporary directories: forget
those modules afterwards, so no other test sees them."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from dsh._resolve import FILE_MODULE_PREFIX


@pytest.fixture(autouse=True)
def forget_plugin_files() -> Iterator[None]:
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(FILE_MODULE_PREFIX):
            del sys.modules[name]
