"""``dsh._entry_points.entry_points`` lists what ``importlib.metadata`` lists, cheaper."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from dsh._entry_points import entry_points, read_together

GROUP = "dsh.probe"


def listed(found: list[importlib.metadata.EntryPoint]) -> list[tuple[str, str, str]]:
    return [(ep.name, ep.value, ep.group) for ep in found]


def stdlib(group: str) -> list[tuple[str, str, str]]:
    return listed(list(importlib.metadata.entry_points(group=group)))


def info(site: Path, directory: str, entry_points: str | None) -> Path:
    path = site / directory
    path.mkdir(parents=True)
    if entry_points is not None:
        (path / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    return path


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory first on ``sys.path``."""
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.setattr(sys, "path", [str(directory), *sys.path])
    return directory


def test_every_installed_group_is_listed_as_importlib_metadata_lists_it() -> None:
    groups = {ep.group for dist in importlib.metadata.distributions() for ep in dist.entry_points}
    assert {"dsh.plugins", "dsh.commands"} <= groups
    for group in sorted(groups):
        assert listed(entry_points(group)) == stdlib(group), group


def test_sections_comments_shadowing_and_odd_files_read_as_importlib_reads_them(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info(
        site,
        "probe_one-1.0.dist-info",
        f"""\
        # a comment
        [console_scripts]
        one = probe_one:main

        [{GROUP}]
          first = probe_one:First
        # another comment
        second=probe_one:Second
        [{GROUP}.more]
        third = probe_one:Third
        """,
    )
    info(site, "probe_two-1.0.egg-info", f"[{GROUP}]\ntwo = probe_two:Two\n")
    info(site, "probe_three-1.0.dist-info", "[other]\nx = y:z\n")  # not the group
    info(site, "probe_four-1.0.dist-info", None)  # no entry_points.txt
    (info(site, "probe_five-1.0.dist-info", None) / "entry_points.txt").mkdir()
    (site / "probe_six-1.0.dist-info").write_text("a file, not a directory")
    (site / "not_metadata").mkdir()
    # The same distribution names again (normalized), later on the path: shadowed.
    later = tmp_path / "later"
    info(later, "Probe.One-2.0.dist-info", f"[{GROUP}]\nshadowed = probe_one:Old\n")
    info(later, "probe_two-9.0.dist-info", f"[{GROUP}]\nlater = probe_two:Later\n")
    cwd = tmp_path / "cwd"
    info(cwd, "probe_seven-1.0.dist-info", f"[{GROUP}]\nseven = probe_seven:Seven\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", [*sys.path, str(later), str(tmp_path / "missing"), ""])

    found = listed(entry_points(GROUP))
    assert found == stdlib(GROUP)  # in the same order (a directory's listing order)
    assert sorted(name for name, _value, _group in found) == ["first", "second", "seven", "two"]


def test_a_line_without_a_value_fails_as_it_does_in_importlib_metadata(site: Path) -> None:
    info(site, "probe_bad-1.0.dist-info", f"[{GROUP}]\nno value here\n")
    with pytest.raises(TypeError):  # (the stdlib's own way of saying it)
        importlib.metadata.entry_points(group=GROUP)
    with pytest.raises(ValueError, match="not enough values"):
        entry_points(GROUP)


class _Finder:
    """A meta-path finder that knows distributions of its own."""

    @staticmethod
    def find_spec(*args: object) -> None:
        return None

    @staticmethod
    def find_distributions(*args: object) -> list[importlib.metadata.Distribution]:
        return []


def _zip(site: Path) -> str:
    archive = site.parent / "packages.zip"
    with zipfile.ZipFile(archive, "w") as file:
        file.writestr("probe_zip-1.0.dist-info/entry_points.txt", f"[{GROUP}]\nz = m:Z\n")
    return str(archive)


@pytest.mark.parametrize(
    "unusual",
    ["a zip file", "an .egg", "not a string", "an upper-case suffix", "a finder"],
)
def test_an_installation_it_does_not_know_is_read_by_importlib_metadata(
    site: Path, monkeypatch: pytest.MonkeyPatch, unusual: str
) -> None:
    if unusual == "a zip file":
        sys.path.append(_zip(site))
    elif unusual == "an .egg":
        sys.path.append(str(info(site.parent, "probe-1.0.egg", None)))
    elif unusual == "not a string":
        sys.path.append(site.parent)  # type: ignore[arg-type]
    elif unusual == "an upper-case suffix":
        info(site, "probe_upper-1.0.DIST-INFO", None)
    else:
        monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, _Finder()])
    answer = [importlib.metadata.EntryPoint(name="asked", value="m:A", group=GROUP)]
    asked: list[str] = []

    def stand_in(*, group: str) -> list[importlib.metadata.EntryPoint]:
        asked.append(group)
        return answer

    monkeypatch.setattr(importlib.metadata, "entry_points", stand_in)
    assert entry_points(GROUP) == answer
    assert asked == [GROUP]


OTHER = "dsh.probe.other"


def test_groups_read_together_are_read_in_one_pass_and_handed_on_once(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info(site, "probe_both-1.0.dist-info", f"[{GROUP}]\na = m:A\n[{OTHER}]\nb = m:B\n")
    opened: list[str] = []
    real_open = open

    def counting_open(path: str, *args: object, **kwargs: object) -> object:
        opened.append(path)
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", counting_open)
    with read_together(GROUP, OTHER):
        first = listed(entry_points(GROUP))
        passes = len(opened)
        second = listed(entry_points(OTHER))
        assert len(opened) == passes  # handed on: nothing read again
        again = listed(entry_points(OTHER))
        assert len(opened) == 2 * passes  # once only: read afresh
    assert first == stdlib(GROUP) == [("a", "m:A", GROUP)]
    assert second == again == stdlib(OTHER) == [("b", "m:B", OTHER)]


def test_what_was_read_together_is_read_afresh_after_a_path_change_or_the_block(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info(site, "probe_both-1.0.dist-info", f"[{GROUP}]\na = m:A\n[{OTHER}]\nb = m:B\n")
    later = tmp_path / "later"
    info(later, "probe_later-1.0.dist-info", f"[{OTHER}]\nc = m:C\n")
    with read_together(GROUP, OTHER):
        entry_points(GROUP)
        monkeypatch.setattr(sys, "path", [*sys.path, str(later)])
        assert [name for name, _v, _g in listed(entry_points(OTHER))] == ["b", "c"]
    with read_together(GROUP, OTHER):
        entry_points(OTHER)
    # Left unasked in its block: not kept after it.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(site)])
    assert "a" not in [name for name, _v, _g in listed(entry_points(GROUP))]


def test_a_group_read_together_with_an_unusual_installation_goes_to_importlib_metadata(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sys.path.append(_zip(site))
    asked: list[str] = []

    def stand_in(*, group: str) -> list[importlib.metadata.EntryPoint]:
        asked.append(group)
        return []

    monkeypatch.setattr(importlib.metadata, "entry_points", stand_in)
    with read_together(GROUP, OTHER):
        assert entry_points(GROUP) == []
        assert entry_points(OTHER) == []
    assert asked == [GROUP, OTHER]
