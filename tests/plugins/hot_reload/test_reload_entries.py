"""Reloading a deployment in place: what changed restarts, nothing else does."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import pytest

from dsh import DeploymentError, ReloadRefusedError
from dsh.testing import capture_logs, run_turn, tool_call, tool_calls
from tests.plugins.hot_reload.reload_support import (
    AGENT,
    fresh_module_name,
    rig,
    tool_names,
    tool_of,
    tool_source,
)

pytestmark = pytest.mark.anyio


async def test_an_edited_tool_is_reloaded_from_a_fresh_module_and_the_next_step_sees_it(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        agent = r.root.agents.create(model="scripted")
        r.model.reply("hello")
        await run_turn(agent, "hi")
        assert tool_of(r.model.requests[-1]).description == "Version one."
        before = dict(r.fibers)
        old_module = sys.modules[fresh_module_name(tmp_path / "tool.py")]
        gone = weakref.ref(old_module)
        del old_module

        r.write("tool.py", tool_source("Version two.", "v2"))
        report = await r.reload("tool.py")

        assert report.reloaded == ("tool",)
        assert report.error is None
        assert report.added == report.removed == ()
        assert r.fibers["tool"] is not before["tool"]
        assert {k: f for k, f in r.fibers.items() if k != "tool"} == {
            k: f for k, f in before.items() if k != "tool"
        }
        r.model.reply(tool_calls(tool_call("probe")), "done")
        await run_turn(agent, "again")
        assert tool_of(r.model.requests[-2]).description == "Version two."
        results = [e.data["content"] for e in agent.session.events if e.type == "tool/result"]
        assert results == ["v2"]
        del before
        gc.collect()
        assert gone() is None  # the old module (and its plugin objects) are released


async def test_a_config_edit_reloads_that_entry_only(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        before = dict(r.fibers)
        r.write("dsh.yml", AGENT.replace("persona: You test.", "persona: You test more."))
        report = await r.reload("dsh.yml")
        assert report.reloaded == ("core",)
        assert r.fibers["reload"] is before["reload"]
        assert r.fibers["core"].config.persona == "You test more."


async def test_entries_are_added_and_removed(tmp_path: Path) -> None:
    other = tool_source().replace('"probe"', '"other"')
    async with rig(tmp_path, files={"other.py": other}) as r:
        before = dict(r.fibers)
        r.write("dsh.yml", AGENT + "- {id: other, name: ./other.py}\n")
        report = await r.reload("dsh.yml")
        assert report.added == ("other",)
        assert {"probe", "other"} <= await tool_names(r.root)
        r.write("dsh.yml", AGENT.replace("- {id: tool, name: ./tool.py}\n", ""))
        report = await r.reload("dsh.yml")
        assert sorted(report.removed) == ["other", "tool"]
        assert "probe" not in await tool_names(r.root)
        assert r.fibers == {k: f for k, f in before.items() if k != "tool"}


async def test_a_syntax_error_leaves_the_running_version_and_a_fix_reloads(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        running = r.fibers["tool"]
        r.write("tool.py", "def broken(:\n")
        with capture_logs("dsh.hot-reload") as logs:
            report = await r.reload("tool.py")
        assert isinstance(report.error, DeploymentError)
        assert f"{tmp_path / 'tool.py'}:1" in str(report.error)
        assert "entry 'tool'" in str(report.error)
        assert [rec.levelname for rec in logs.records] == ["WARNING"]
        assert "the running version stays" in logs.records[0].getMessage()
        assert r.fibers["tool"] is running
        assert "probe" in await tool_names(r.root)

        r.write("tool.py", tool_source("Fixed.", "v3"))
        report = await r.reload("tool.py")
        assert report.reloaded == ("tool",)
        assert report.error is None
        assert r.fibers["tool"] is not running


async def test_removing_a_required_service_is_refused_with_its_location(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        before = dict(r.fibers)
        r.write("dsh.yml", AGENT.replace("- {id: core,", "- {disabled: true, id: core,"))
        report = await r.reload("dsh.yml")
        assert isinstance(report.error, ReloadRefusedError)
        assert report.error.code == "RELOAD_REFUSED"
        message = str(report.error)
        assert f"{r.file}:2: entry 'tool'" in message
        assert 'requires service "tools"' in message
        assert r.fibers == before
        assert "probe" in await tool_names(r.root)


async def test_a_new_version_that_fails_to_start_brings_the_old_one_back(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        r.write(
            "tool.py", "inject = ['tools']\n\ndef apply(ctx, config):\n    raise OSError('no')\n"
        )
        with capture_logs("dsh"):
            report = await r.reload("tool.py")
        assert isinstance(report.error, DeploymentError)
        assert "OSError: no" in str(report.error)
        assert "probe" in await tool_names(r.root)
        assert r.fibers["tool"].state.name == "ACTIVE"


async def test_its_own_entry_is_held_with_a_warning(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        own = r.fibers["reload"]
        r.write("dsh.yml", AGENT.replace("watch: false", "watch: false, debounce_ms: 5"))
        with capture_logs("dsh.hot-reload") as logs:
            report = await r.reload("dsh.yml")
        assert report.reloaded == ()
        assert report.error is None
        assert r.fibers["reload"] is own
        assert "its own entry changed" in logs.records[0].getMessage()


async def test_its_own_entry_removed_is_held_too(tmp_path: Path) -> None:
    other = tool_source().replace('"probe"', '"other"')
    async with rig(tmp_path, files={"other.py": other}) as r:
        own = r.fibers["reload"]
        without = AGENT.replace("- {id: reload, name: hot-reload, config: {watch: false}}\n", "")
        r.write("dsh.yml", without + "- {id: other, name: ./other.py}\n")
        with capture_logs("dsh.hot-reload"):
            report = await r.reload("dsh.yml")
        assert (report.added, report.removed) == (("other",), ())
        assert r.fibers["reload"] is own
        assert r.deployment.instance.plan[-1].entry.id == "reload"  # kept in the plan


async def test_an_added_entry_that_fails_is_unloaded_again(tmp_path: Path) -> None:
    broken = "inject = ['tools']\n\ndef apply(ctx, config):\n    raise OSError('no')\n"
    async with rig(tmp_path, files={"broken.py": broken}) as r:
        before = dict(r.fibers)
        r.write("dsh.yml", AGENT + "- {id: broken, name: ./broken.py}\n")
        with capture_logs("dsh"):
            report = await r.reload("dsh.yml")
        assert "entry 'broken'" in str(report.error)
        assert r.fibers == before


async def test_an_unchanged_file_reloads_nothing(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        before = dict(r.fibers)
        report = await r.reload()
        assert (report.added, report.removed, report.reloaded) == ((), (), ())
        assert r.fibers == before
        assert r.reports == [report]
