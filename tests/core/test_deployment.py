"""load_deployment: YAML plugin lists started all-or-nothing, failures named by file:line."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import dsh
from dsh import Context, DeploymentError, FiberState, load_deployment
from dsh.testing import write_deployment

pytestmark = pytest.mark.anyio

PLUGIN_FILE = """
from pydantic import BaseModel, ConfigDict

import dsh

LOG: list[str] = []


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str = "x"
    count: int = 0


def apply(ctx, config):
    LOG.append(f"up {config.label}")
    return lambda: LOG.append(f"down {config.label}")


class Provider(dsh.Service):
    key = "thing"


class Needy(dsh.Plugin):
    inject = ["thing"]

    def setup(self):
        LOG.append("needy up")
        return lambda: LOG.append("needy down")


class Broken(dsh.Plugin):
    def setup(self):
        raise RuntimeError("broken on purpose")


class Waits(dsh.Plugin):
    inject = ["never-provided"]
"""


@pytest.fixture
def plugin_log(tmp_path: Path) -> list[str]:
    (tmp_path / "plug.py").write_text(PLUGIN_FILE)
    return []


def module_log(fiber: dsh.Fiber) -> list[str]:
    """The LOG list of the module a file plugin came from."""
    assert fiber.spec is not None
    obj = fiber.spec.obj
    module = obj if isinstance(obj, ModuleType) else sys.modules[obj.__module__]
    log: list[str] = module.LOG
    return log


def file_log(path: Path) -> list[str]:
    """The LOG list of the module imported from ``path``."""
    module = next(
        m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(path)
    )
    log: list[str] = module.LOG
    return log


async def test_loads_entries_groups_disabled_and_env(tmp_path: Path, plugin_log: list[str]) -> None:
    path = write_deployment(
        tmp_path,
        """
        - id: one
          name: ./plug.py
          config: {label: !env LABEL_ONE, count: 1}
        - id: grouped
          group: true
          config:
            - id: two
              name: ./plug.py
              config: {label: !env [LABEL_TWO, two-default]}
            - id: switched-off
              name: ./plug.py
              disabled: true
              config: {label: !env NOT_SET_ANYWHERE}
        - id: off-group
          group: true
          disabled: true
          config:
            - id: three
              name: ./plug.py
        """,
    )
    async with Context() as root:
        deployment = await load_deployment(path, root, environ={"LABEL_ONE": "first"})
        fibers = deployment.instance.fibers
        assert sorted(fibers) == ["grouped", "one", "two"]
        assert fibers["one"].config.label == "first"
        assert fibers["one"].config.count == 1
        assert fibers["two"].config.label == "two-default"
        assert fibers["one"].name == "plug"
        assert fibers["grouped"].name == "group:grouped"
        assert all(f.state is FiberState.ACTIVE for f in fibers.values())
        log = module_log(fibers["one"])
        assert sorted(log) == ["up first", "up two-default"]
        await deployment.dispose()
        assert all(f.state is FiberState.DISPOSED for f in fibers.values())
        assert sorted(log[2:]) == ["down first", "down two-default"]
        log.clear()


async def test_os_environ_is_the_default(
    tmp_path: Path, plugin_log: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_TEST_LABEL", "from-os")
    path = write_deployment(
        tmp_path, "- {id: one, name: ./plug.py, config: {label: !env DSH_TEST_LABEL}}"
    )
    async with Context() as root:
        deployment = await load_deployment(path, root)
        assert deployment.instance.fibers["one"].config.label == "from-os"
        module_log(deployment.instance.fibers["one"]).clear()


async def test_provider_after_dependent_in_file_order(
    tmp_path: Path, plugin_log: list[str]
) -> None:
    path = write_deployment(
        tmp_path,
        """
        - {id: needy, name: "./plug.py:Needy"}
        - {id: provider, name: "./plug.py:Provider"}
        """,
    )
    async with Context() as root:
        deployment = await load_deployment(path, root)
        fibers = deployment.instance.fibers
        assert fibers["needy"].state is FiberState.ACTIVE
        assert fibers["provider"].name == "Provider"
        log = module_log(fibers["needy"])
        assert log == ["needy up"]
        await deployment.dispose()
        assert log == ["needy up", "needy down"]
        log.clear()


async def test_every_plan_problem_is_reported_and_nothing_starts(
    tmp_path: Path, plugin_log: list[str]
) -> None:
    path = write_deployment(
        tmp_path,
        """
        - id: bad-config
          name: ./plug.py
          config:
            count: lots
            colour: red
        - id: unknown
          name: no-such-plugin-anywhere
        - id: missing-env
          name: ./plug.py
          config: {label: !env DSH_DEFINITELY_UNSET}
        - id: not-a-plugin
          name: "textwrap:dedent_missing"
        - id: not-a-plugin-class
          name: "json:JSONDecoder"
        - id: fine
          name: ./plug.py
        """,
    )
    async with Context() as root:
        with pytest.raises(DeploymentError) as info:
            await load_deployment(path, root, environ={})
        failures = info.value.failures
        assert len(failures) == 5
        text = str(info.value)
        assert text.startswith(f"deployment {path} has 5 problems:")
        assert f"{path}:2: entry 'bad-config'" in text
        assert "Input should be a valid integer, unable to parse string as an integer" in text
        assert f"{path}:6: Extra inputs are not permitted (at colour)" in text
        assert f"{path}:7: entry 'unknown': unknown plugin" in text
        assert "environment variable DSH_DEFINITELY_UNSET is not set" in text
        assert "entry 'not-a-plugin'" in text
        assert "entry 'not-a-plugin-class': invalid plugin JSONDecoder" in text
        assert root.fiber._effects == {}


async def test_start_failures_roll_back_everything(tmp_path: Path, plugin_log: list[str]) -> None:
    path = write_deployment(
        tmp_path,
        """
        - {id: fine, name: ./plug.py, config: {label: fine}}
        - {id: broken, name: "./plug.py:Broken"}
        - {id: waits, name: "./plug.py:Waits"}
        """,
    )
    async with Context() as root:
        with pytest.raises(DeploymentError) as info:
            await load_deployment(path, root)
        failures = info.value.failures
        assert failures == [
            f"{path}:3: entry 'broken': plugin \"Broken\" failed: RuntimeError: broken on purpose",
            f"{path}:4: entry 'waits': plugin \"Waits\" is waiting for service(s) "
            '"never-provided" that no active plugin provides',
        ]
        log = file_log(tmp_path / "plug.py")
        assert log == ["up fine", "down fine"]
        log.clear()
        assert root.fiber._effects == {}


async def test_config_error_at_activation_names_the_entry(tmp_path: Path) -> None:
    # A config that only fails when the plugin activates (the plan validates the
    # same model, so use a plugin whose Config rejects what it is given at start).
    (tmp_path / "late.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel, field_validator

            CALLS = []


            class Config(BaseModel):
                value: int = 0

                @field_validator("value")
                @classmethod
                def second_time_fails(cls, v: int) -> int:
                    CALLS.append(v)
                    if len(CALLS) > 1:
                        raise ValueError("changed its mind")
                    return v


            def apply(ctx, config):
                return None
            """
        )
    )
    path = write_deployment(tmp_path, "- {id: late, name: ./late.py, config: {value: 3}}")
    async with Context() as root:
        with pytest.raises(DeploymentError) as info:
            await load_deployment(path, root)
        (failure,) = info.value.failures
        assert failure.startswith(f"invalid config for plugin \"late\" ({path}:1: entry 'late')")
        assert f"{path}:1: Value error, changed its mind (at value)" in failure


async def test_deployment_error_is_a_dsh_error(tmp_path: Path) -> None:
    path = write_deployment(tmp_path, "- {name: 42}")
    async with Context() as root:
        with pytest.raises(dsh.DshError) as info:
            await load_deployment(str(path), root)
        assert info.value.code == "DEPLOYMENT_FAILED"


def test_public_signature() -> None:
    import inspect

    params: dict[str, Any] = dict(inspect.signature(load_deployment).parameters)
    assert list(params) == ["path", "ctx", "environ"]


async def test_an_entry_whose_variable_is_unset_can_be_left_out(
    tmp_path: Path, plugin_log: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DSH_TEST_UNSET", raising=False)
    provider = (
        '- {id: provider, name: "./plug.py:Provider", config: {token: !env DSH_TEST_UNSET}}\n'
    )
    path = write_deployment(tmp_path, provider + "- {id: fine, name: ./plug.py}\n")
    unset = f"{path}:1: entry 'provider': environment variable DSH_TEST_UNSET is not set"
    async with Context() as root:
        with pytest.raises(DeploymentError) as info:
            await load_deployment(path, root)
        assert info.value.failures == [unset]
        with dsh.leave_out_unset_env():
            deployment = await load_deployment(path, root)
        assert deployment.instance.left_out == [unset]
        assert list(deployment.instance.fibers) == ["fine"]
        await deployment.dispose()
        # What fails without the entry is reported after it, as is any other problem.
        for other, problem in [
            (
                '- {id: needy, name: "./plug.py:Needy"}\n',
                f"{path}:2: entry 'needy': plugin \"Needy\" is waiting for service(s) "
                '"thing" that no active plugin provides',
            ),
            (
                "- {id: bad, name: ./plug.py, config: {count: many}}\n",
                'invalid config for plugin "plug"',
            ),
        ]:
            write_deployment(tmp_path, provider + other)
            with dsh.leave_out_unset_env(), pytest.raises(DeploymentError) as info:
                await load_deployment(path, root)
            assert info.value.failures[0] == unset
            assert info.value.failures[1].startswith(problem)
            assert len(info.value.failures) == 2
