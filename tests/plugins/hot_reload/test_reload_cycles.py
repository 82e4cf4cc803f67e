"""Many reloads leave nothing behind; groups reload only the child that changed."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import anyio
import pytest

from dsh import Context, load_deployment
from dsh.testing import write_deployment
from dsh_hot_reload import HotReload

pytestmark = pytest.mark.anyio

#: A service and a plugin that injects it: reloading the service restarts its user.
SERVICE = """\
from dsh import Service


class Box(Service):
    key = "box"
    version = {version}
"""

USER = """\
inject = ["box"]


def apply(ctx, config):
    return None
"""

#: The lean deployment of the thousand cycles: a service and its user.
LEAN = "- {id: box, name: ./box.py}\n- {id: user, name: ./user.py}\n"

CYCLES = """\
- {id: box, name: ./box.py}
- id: team
  group: true
  config:
    - {id: user, name: ./user.py}
    - {id: other, name: ./other.py}
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # one backend: it is the slow one
async def test_a_thousand_reloads_do_not_grow_objects_tasks_or_modules(tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text(USER)
    box = tmp_path / "box.py"
    box.write_text(SERVICE.format(version=0))
    path = write_deployment(tmp_path, LEAN)
    async with Context() as root:
        deployment = await load_deployment(path, root)
        await deployment.ctx.plugin(HotReload, {"watch": False})
        first = root.box
        hot: HotReload = root.hot_reload
        runtime = root.fiber.runtime

        async def cycles(count: int) -> None:
            for _ in range(count):
                # The file as it is: its module is imported afresh all the same.
                report = await hot.reload([box])
                assert report.reloaded == ("box",), report.error

        await cycles(20)
        gc.collect()
        objects, tasks, modules = (
            len(gc.get_objects()),
            len(anyio.get_running_tasks()),
            len(sys.modules),
        )
        specs, effects = len(runtime.plugin_specs), len(deployment._effects)
        await cycles(1000)
        gc.collect()
        assert len(anyio.get_running_tasks()) == tasks
        assert len(sys.modules) == modules
        assert (len(runtime.plugin_specs), len(deployment._effects)) == (specs, effects)
        assert len(gc.get_objects()) - objects < 500  # no per-reload residue
        assert root.box.version == 0
        assert root.box is not first


async def test_a_changed_child_of_a_group_reloads_alone(tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text(USER)
    (tmp_path / "other.py").write_text(USER)
    (tmp_path / "box.py").write_text(SERVICE.format(version=0))
    path = write_deployment(tmp_path, CYCLES)
    async with Context() as root:
        deployment = await load_deployment(path, root)
        await deployment.ctx.plugin(HotReload, {"watch": False})
        fibers = dict(deployment.instance.fibers)
        (tmp_path / "other.py").write_text(USER + "\nVERSION = 2\n")
        path.write_text(CYCLES.replace("    - {id: user", "\n    - {id: user"))
        report = await root.hot_reload.reload([tmp_path / "other.py"])
        assert report.reloaded == ("other",)
        now = deployment.instance.fibers
        assert [now[k] is fibers[k] for k in ("box", "team", "user")] == [True] * 3
        assert now["user"].entry.where.endswith(":6: entry 'user'")  # moved a line down
        path.write_text(CYCLES.replace("group: true", "group: true\n  disabled: false"))
        (tmp_path / "user.py").write_text(USER + "\n")
        report = await root.hot_reload.reload([tmp_path / "user.py"])
        assert report.reloaded == ("user",)
