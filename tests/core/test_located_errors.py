"""Errors that say where: conflicts between entries, unknown keys, plugin files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsh import Context, DeploymentError, DuplicateNameError, PluginLoadError, cli, load_deployment
from dsh._resolve import resolve_plugin
from dsh.testing import write_deployment
from dsh_tools import DuplicateToolError
from tests.support import echo_deployment

pytestmark = pytest.mark.anyio

TWO_TOOLS = """\
from pydantic import BaseModel

from dsh_tools import Tool


class NoArgs(BaseModel):
    pass


async def run(args, call):
    return "ok"


def tool_plugin(ctx, config):
    return ctx.tools.register(Tool(name="echo", description="", parameters=NoArgs, execute=run))


tool_plugin.inject = ["tools"]


def section_plugin(ctx, config):
    from dsh_system_prompt import PromptSection

    return ctx.system_prompt.section(PromptSection(name="tool:echo", order=100, text="x"))


section_plugin.inject = ["system_prompt"]
"""


async def load_failures(path: Path) -> list[str]:
    async with Context() as root:
        with pytest.raises(DeploymentError) as info:
            await load_deployment(path, root)
    return info.value.failures


@pytest.mark.parametrize("plugin", ["tool_plugin", "section_plugin"])
async def test_two_entries_claiming_one_name_blame_the_later_one(
    tmp_path: Path, plugin: str
) -> None:
    (tmp_path / "claims.py").write_text(TWO_TOOLS)
    path = write_deployment(
        tmp_path,
        f"""\
        - {{id: core, name: agent-core}}
        - {{id: first, name: "./claims.py:{plugin}"}}
        - {{id: second, name: "./claims.py:{plugin}"}}
        """,
    )
    kind, name = ("tool", "echo") if plugin == "tool_plugin" else ("prompt section", "tool:echo")
    expected = [
        f'{path}:3: entry \'second\': plugin "{plugin}" registers {kind} "{name}", '
        f"which plugin \"{plugin}\" ({path}:2: entry 'first') registers too"
    ]
    # Whichever of the two loaded first (trio starts tasks in a random order), the
    # report is the same line, about the later entry, naming both.
    for _ in range(5):
        assert await load_failures(path) == expected


async def test_a_duplicate_tool_error_carries_both_owners() -> None:
    from dsh_agent_core import AgentCore
    from dsh_tools import Tool
    from tests.plugins.tools.tools_support import NoArgs, answer

    async with Context() as root:
        await root.plugin(AgentCore, {})
        tool = Tool(name="echo", description="", parameters=NoArgs, execute=answer)
        root.tools.register(tool)
        with pytest.raises(DuplicateToolError) as info:
            root.tools.register(tool)
    error = info.value
    assert isinstance(error, DuplicateNameError)
    assert (error.kind, error.name) == ("tool", "echo")
    assert error.holder is error.claimant is root.fiber
    assert error.code == "TOOL_REGISTRATION"


@pytest.mark.parametrize(
    ("config", "hint"),
    [
        ("{toolOrder: [a]}", 'did you mean "tool_order"?'),
        ("{persna: hi}", 'did you mean "persona"?'),
        ("{agents: [{id: a, modle: m}]}", 'did you mean "model"?'),
    ],
)
async def test_an_unknown_key_suggests_the_closest_known_one(
    tmp_path: Path, config: str, hint: str
) -> None:
    path = write_deployment(tmp_path, f"- {{id: core, name: agent-core, config: {config}}}\n")
    (failure,) = await load_failures(path)
    assert failure.rstrip().endswith(hint)
    assert "Extra inputs are not permitted (at " in failure


async def test_an_unknown_key_far_from_any_gets_no_suggestion(tmp_path: Path) -> None:
    path = write_deployment(tmp_path, "- {id: core, name: agent-core, config: {zzzz: 1}}\n")
    (failure,) = await load_failures(path)
    assert failure.rstrip().endswith("Extra inputs are not permitted (at zzzz)")


ONE_CLASS = """\
import dsh
from dsh import Plugin  # imported classes do not count


class Greeter(dsh.Plugin):
    def setup(self):
        self.ctx.fiber.instance.greeted = True
"""


def test_a_file_whose_only_plugin_is_a_class_loads_as_that_class(tmp_path: Path) -> None:
    (tmp_path / "greeter.py").write_text(ONE_CLASS)
    plugin, _ = resolve_plugin("./greeter.py", tmp_path)
    assert isinstance(plugin, type)
    assert plugin.__name__ == "Greeter"


def test_a_file_with_several_plugin_classes_names_them(tmp_path: Path) -> None:
    (tmp_path / "two.py").write_text(ONE_CLASS + "\n\nclass Other(dsh.Plugin):\n    pass\n")
    with pytest.raises(PluginLoadError) as info:
        resolve_plugin("./two.py", tmp_path)
    assert str(info.value) == (
        'cannot load plugin "./two.py": it defines several plugin classes (Greeter, Other); '
        'name one ("./two.py:Greeter"), or set plugin = <the class>'
    )
    plugin, _ = resolve_plugin("./two.py:Other", tmp_path)
    assert getattr(plugin, "__name__", None) == "Other"


def test_a_syntax_error_in_a_plugin_file_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("x = 1\ndef apply(ctx, config)\n    pass\n")
    with pytest.raises(PluginLoadError) as info:
        resolve_plugin("./bad.py", tmp_path)
    assert str(info.value).endswith(f"(at {tmp_path / 'bad.py'}:2)")


async def test_a_duplicate_name_error_without_owners_is_reported_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "raises.py").write_text(
        "from dsh import DuplicateNameError\n\n"
        "def apply(ctx, config):\n"
        "    raise DuplicateNameError('thing \"x\" is taken', kind='thing', name='x')\n"
    )
    path = write_deployment(tmp_path, "- {id: r, name: ./raises.py}\n")
    assert await load_failures(path) == [
        f'{path}:1: entry \'r\': plugin "raises" failed: DuplicateNameError: thing "x" is taken'
    ]


def test_two_agent_core_entries_are_one_problem_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each bundle fails on whichever of its services the other got first; the model
    # and the tool then wait for services that went away with them. One line says why.
    path = echo_deployment(
        tmp_path,
        "{model: echo-mock}",
        "- {id: core-2, name: agent-core, config: {model: echo-mock}}",
    )
    assert cli.main(["check", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert re.fullmatch(
        rf"deployment {re.escape(str(path))} has 1 problem:\n"
        rf"{re.escape(str(path))}:4: entry 'core-2': plugin \"agent-core\" provides "
        r'services? "[a-z_]+"(, "[a-z_]+")*, '
        rf"which plugin \"agent-core\" \({re.escape(str(path))}:2: entry 'agent-core'\) "
        r"provides too\n",
        captured.err,
    ), captured.err


THING = "from dsh import Service\n\n\nclass Thing(Service):\n    key = name = 'thing'\n"


async def test_two_entries_providing_one_service_are_one_line_about_the_later(
    tmp_path: Path,
) -> None:
    (tmp_path / "thing.py").write_text(THING)
    path = write_deployment(
        tmp_path, "- {id: one, name: ./thing.py}\n- {id: two, name: ./thing.py}\n"
    )
    for _ in range(5):
        assert await load_failures(path) == [
            f'{path}:2: entry \'two\': plugin "thing" provides service "thing", '
            f"which plugin \"thing\" ({path}:1: entry 'one') provides too"
        ]


async def test_a_service_taken_outside_the_deployment_is_reported_as_it_is(
    tmp_path: Path,
) -> None:
    (tmp_path / "thing.py").write_text(THING)
    path = write_deployment(tmp_path, "- {id: thing, name: ./thing.py}\n")
    plugin, _ = resolve_plugin("./thing.py", tmp_path)
    async with Context() as root:
        await root.plugin(plugin)
        with pytest.raises(DeploymentError) as info:
            await load_deployment(path, root)
    assert info.value.failures == [
        f"{path}:1: entry 'thing': plugin \"thing\" failed: ServiceConflictError: "
        'service "thing" is already provided by plugin "thing"; plugin "thing" cannot '
        "provide it too"
    ]


async def test_a_part_failing_after_its_entry_loaded_is_logged_as_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # While an entry loads, its parts' failures fail it and its report says so; later
    # nobody reports them but the log.
    (tmp_path / "host.py").write_text("def apply(ctx, config):\n    return None\n")
    path = write_deployment(tmp_path, "- {id: host, name: ./host.py}\n")

    def broken(ctx: Context, config: object) -> None:
        raise RuntimeError("the part broke")

    async with Context() as root:
        deployment = await load_deployment(path, root)
        host = deployment.instance.fibers["host"]
        with pytest.raises(RuntimeError):
            await host.ctx.plugin(broken)
    assert [r.levelname for r in caplog.records if "failed to start" in r.message] == ["ERROR"]
