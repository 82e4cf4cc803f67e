"""The watcher: edits on disk reload the deployment, a burst of them once."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from dsh import Context, PluginLoadError, load_deployment
from dsh.testing import write_deployment
from dsh_hot_reload import HotReload, HotReloadError, ReloadReport, watch
from dsh_hot_reload._watch import Watcher
from tests.plugins.hot_reload.reload_support import (
    Rig,
    next_report,
    rig,
    tool_source,
)

pytestmark = pytest.mark.anyio

WATCHED = """\
- {id: core, name: agent-core, config: {model: scripted, persona: You test.}}
- {id: tool, name: ./tool.py}
- {id: reload, name: hot-reload, config: {paths: [lib]}}
"""


async def _watching(r: Rig) -> None:
    """Wait until the watcher sees changes: the watching thread gives no sign that
    it has started, so touch the deployment file until a reload answers (bounded)."""
    text = r.file.read_text()
    for _ in range(20):
        r.file.write_text(text)
        with anyio.move_on_after(1):
            await next_report(r.root)
            return
    raise AssertionError("the watcher never reported a change")


async def _edit(r: Rig, name: str, text: str) -> ReloadReport:
    """Write ``name`` and wait for the reload that follows."""
    with anyio.fail_after(10):
        return await _edited(r, (name, text))


async def _edited(r: Rig, *writes: tuple[str, str]) -> ReloadReport:
    """Make the ``(name, text)`` writes, one after the other: the first reload after."""
    async with anyio.create_task_group() as tg:
        got: list[ReloadReport] = []

        async def wait() -> None:
            got.append(await next_report(r.root))

        tg.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        for name, text in writes:
            r.write(name, text)
    return got[0]


async def test_a_burst_of_writes_is_one_reload(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    async with rig(tmp_path, WATCHED) as r:
        await _watching(r)
        burst = [("tool.py", tool_source(f"Version {n}.", str(n))) for n in range(5)]
        # notes.txt is in a watched directory, but not wanted.
        got = await _edited(r, *burst, ("notes.txt", "not watched"))
        assert got.changed == {tmp_path / "tool.py"}
        assert got.reloaded == ("tool",)
        # The next reload is for the next change only: the burst made one.
        report = await _edit(r, "dsh.yml", WATCHED)
        assert report.changed == {r.file}
        assert report.reloaded == ()


async def test_added_file_plugins_and_configured_paths_are_watched(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    other = tool_source().replace('"probe"', '"other"')
    async with rig(tmp_path, WATCHED, files={"other.py": other}) as r:
        await _watching(r)
        report = await _edit(r, "dsh.yml", WATCHED + "- {id: other, name: ./other.py}\n")
        assert report.added == ("other",)
        report = await _edit(r, "other.py", other.replace("v1", "v2"))
        assert report.reloaded == ("other",)
        report = await _edit(r, "lib/helper.py", "X = 1\n")
        assert report.changed == {tmp_path / "lib" / "helper.py"}


async def test_a_file_plugin_in_another_directory_is_watched_once_added(
    tmp_path: Path,
) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "sub").mkdir()
    other = tool_source().replace('"probe"', '"other"')
    async with rig(tmp_path, WATCHED, files={"sub/other.py": other}) as r:
        await _watching(r)
        report = await _edit(r, "dsh.yml", WATCHED + "- {id: other, name: ./sub/other.py}\n")
        assert report.added == ("other",)
        # The watching threads start again (for sub/): edit until the change is seen.
        for n in range(20):
            with anyio.move_on_after(1):
                report = await _edited(r, ("sub/other.py", other.replace("v1", f"v{n + 2}")))
                break
        assert report.reloaded == ("other",)


async def test_disposing_stops_the_watcher(tmp_path: Path) -> None:
    path = write_deployment(tmp_path, "- {id: reload, name: hot-reload}\n")
    async with Context() as root:
        deployment = await load_deployment(path, root)
        assert root.get("hot_reload") is not None
        await deployment.dispose()
        assert root.get("hot_reload") is None
        assert root.fiber.runtime.plugin_specs == {}


async def test_watch_starts_hot_reload_once(tmp_path: Path) -> None:
    path = write_deployment(
        tmp_path,
        "- {id: sp, name: system-prompt}\n- {id: t, name: tools}\n- {id: tool, name: ./tool.py}\n",
    )
    (tmp_path / "tool.py").write_text(tool_source())
    async with Context() as root:
        deployment = await load_deployment(path, root)
        fiber = await watch(deployment)
        assert fiber is not None
        assert isinstance(root.hot_reload, HotReload)
        assert await watch(deployment) is None
        assert root.hot_reload.watched() == [path, tmp_path / "tool.py"]


async def test_outside_a_deployment_it_fails_naming_why() -> None:
    async with Context() as root:
        with pytest.raises(HotReloadError, match="dsh run --watch"):
            await root.plugin(HotReload, {"watch": False})


async def test_without_watchfiles_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "watchfiles", None)
    path = write_deployment(tmp_path, "- {id: reload, name: hot-reload}\n")
    async with Context() as root:
        with pytest.raises(PluginLoadError, match=r"pip install 'dsh-harness\[watch\]'"):
            await load_deployment(path, root)


async def test_changes_to_files_nobody_wants_are_dropped(tmp_path: Path) -> None:
    wanted = tmp_path / "dsh.yml"

    async def fake_awatch(*roots: Path, **options: object) -> AsyncIterator[set[tuple[int, str]]]:
        yield {(2, str(tmp_path / "notes.txt"))}
        yield {(2, str(wanted)), (2, str(tmp_path / "other.txt"))}

    async def ignore(paths: set[Path]) -> None:
        raise AssertionError("not called")

    watcher = Watcher(lambda: [wanted], 0.2, ignore)
    watcher.refresh()
    send, receive = anyio.create_memory_object_stream[set[Path]](10)
    async with send, receive:
        await watcher._follow(fake_awatch, [tmp_path], False, anyio.Event(), send)
        assert receive.receive_nowait() == {wanted}
        with pytest.raises(anyio.WouldBlock):
            receive.receive_nowait()
