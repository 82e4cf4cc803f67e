"""The agent-core bundle: config to agents, prompt settings, failure, clean disposal."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dsh import ConfigError, Context, FiberState, load_deployment
from dsh.testing import ScriptedModel, write_deployment
from dsh_agent import AgentError
from dsh_agent_core import AgentCore
from dsh_system_prompt import TOOL_ORDER_REST, ToolOrderError, ToolProviderResult, ToolSchema
from tests.support import IDENT

pytestmark = pytest.mark.anyio

SERVICES = ("system_prompt", "llm", "sessions", "agents", "tools")


async def test_a_model_alone_declares_the_agent_main() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "mock", "persona": "Helper on {{model}}."})
        model = ScriptedModel("ok", models=["mock"])
        model.install(root)
        (agent,) = root.agents.list()
        assert (agent.id, agent.model) == ("main", "mock")
        agent.send("hi")
        await agent.when_idle()
        assert agent.session.turn_end(1) == {"kind": "completed"}
        assert model.requests[0].system == f"{IDENT}\n\nHelper on mock."


async def test_declared_agents_take_the_bundle_model_unless_they_name_one() -> None:
    async with Context() as root:
        config = {
            "model": "default-model",
            "agents": [
                {"id": "plain"},
                {"id": "special", "model": "special-model", "persona": "Special.", "cwd": "/s"},
            ],
            "max_parallel_tool_calls": 2,
        }
        await root.plugin(AgentCore, config)
        plain, special = root.agents.list()
        # A declared agent without a cwd works where the deployment runs (RFC 0009).
        assert (plain.id, plain.model, plain.cwd) == ("plain", "default-model", os.getcwd())
        assert (special.id, special.model, special.cwd) == ("special", "special-model", "/s")
        prompt = await root.system_prompt.assemble(root.agents.assemble_context_for(special))
        assert prompt.sections[1].text == "Special."


async def test_no_model_and_no_agents_declares_nothing() -> None:
    async with Context() as root:
        await root.plugin(AgentCore)
        assert root.agents.list() == []
        assert (await root.system_prompt.assemble()).sections[1].text == ""


async def test_persona_and_tool_order_reach_the_system_prompt() -> None:
    async with Context() as root:
        config = {"persona": "Be brief.", "tool_order": ["todo", TOOL_ORDER_REST]}
        await root.plugin(AgentCore, config)

        def provide(context: Any) -> ToolProviderResult:
            return ToolProviderResult(
                schemas=[ToolSchema(name=n, description=n, parameters={}) for n in ("b", "todo")]
            )

        root.system_prompt.tools(provide)
        assembly = await root.system_prompt.assemble()
        assert [t.name for t in assembly.tools] == ["todo", "b"]
        assert assembly.sections[1].text == "Be brief."


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"agents": [{"id": "a"}, {"id": "a"}]}, "repeated: a"),
        ({"modle": "typo"}, "Extra inputs"),
        ({"max_parallel_tool_calls": 0}, "greater than 0"),
    ],
)
async def test_bad_config_fails_the_bundle(config: dict[str, Any], problem: str) -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match=problem):
            await root.plugin(AgentCore, config)


async def test_a_part_that_fails_fails_the_bundle_and_leaves_nothing() -> None:
    async with Context() as root:
        fiber = root.plugin(AgentCore, {"model": "m", "tool_order": ["bash"]})
        with pytest.raises(ToolOrderError, match="<unlisted-tools>"):
            await fiber
        assert fiber.state is FiberState.FAILED
        for key in SERVICES:
            assert root.get(key) is None, key


async def test_disposal_leaves_nothing_behind() -> None:
    async with Context() as root:
        fiber = await root.plugin(AgentCore, {"model": "mock", "persona": "P."})
        ScriptedModel("ok", models=["mock"]).install(root)
        agent = root.agents.get("main")
        agent.send("hi")
        await agent.when_idle()
        await fiber.dispose()
        for key in SERVICES:
            assert root.get(key) is None, key
        with pytest.raises(AgentError, match='agent "main" is disposed; it takes no more'):
            agent.send("anyone?")
        # Everything can come back in the same runtime: nothing was left registered.
        again = await root.plugin(AgentCore, {"model": "mock", "persona": "P."})
        assert [a.id for a in root.agents.list()] == ["main"]
        await again.dispose()


async def test_from_a_yaml_deployment(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(
        "from dsh.testing import ScriptedModel\n"
        "inject = ['llm']\n"
        "def apply(ctx, config):\n"
        "    return ScriptedModel('hello from yaml', models=['yaml-model']).install(ctx)\n"
    )
    path = write_deployment(
        tmp_path,
        """\
        - id: model
          name: ./model.py
        - id: core
          name: agent-core
          config:
            model: yaml-model
            persona: 'You run on {{model}}.'
            agents: [{id: helper, cwd: /srv}]
        """,
    )
    async with Context() as root:
        deployment = await load_deployment(path, root)
        agent = root.agents.get("helper")
        agent.send("hi")
        await agent.when_idle()
        assert agent.session.derive_messages()[-1].text == "hello from yaml"
        await deployment.dispose()
        assert root.get("agents") is None
