"""pydantic's plugin group is read in dsh's own entry-point pass (RFC 0055): with no
pydantic plugin installed, pydantic's loader does not read the distributions again."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from pydantic.plugin import _loader

from dsh._entry_points import entry_points, read_together
from dsh._pydantic_plugins import PYDANTIC_GROUP, found_pydantic_plugins

GROUP = "dsh.probe"


@pytest.fixture
def unloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic's loader as it is before the first model is built (restored after)."""
    monkeypatch.setattr(_loader, "_plugins", None)
    monkeypatch.setattr(_loader, "_loading_plugins", False)


def refuse_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def scan(**params: object) -> list[importlib.metadata.EntryPoint]:
        raise AssertionError(f"pydantic read the distributions again: {params}")

    monkeypatch.setattr(_loader, "entry_points", scan)


@pytest.mark.usefixtures("unloaded")
def test_no_pydantic_plugin_in_the_pass_spares_pydantic_its_own_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with read_together(GROUP, PYDANTIC_GROUP):
        entry_points(GROUP)
        refuse_scan(monkeypatch)
        assert list(_loader.get_plugins()) == []
    assert _loader._plugins == {}


@pytest.mark.usefixtures("unloaded")
def test_a_pydantic_plugin_in_the_pass_is_left_for_pydantic_to_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "probe_plugin-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text(f"[{PYDANTIC_GROUP}]\nprobe = probe_plugin:plugin\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    with read_together(GROUP, PYDANTIC_GROUP):
        entry_points(GROUP)
    assert _loader._plugins is None


@pytest.mark.usefixtures("unloaded")
def test_a_loader_that_looked_is_looking_or_keeps_no_cache_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded: dict[str, object] = {"probe": object()}
    monkeypatch.setattr(_loader, "_plugins", loaded)
    found_pydantic_plugins([])
    assert vars(_loader)["_plugins"] is loaded
    monkeypatch.setattr(_loader, "_plugins", None)
    monkeypatch.setattr(_loader, "_loading_plugins", True)
    found_pydantic_plugins([])
    assert vars(_loader)["_plugins"] is None
    monkeypatch.setattr(_loader, "_loading_plugins", False)
    monkeypatch.delattr(_loader, "_plugins")
    found_pydantic_plugins([])
    assert "_plugins" not in vars(_loader)
