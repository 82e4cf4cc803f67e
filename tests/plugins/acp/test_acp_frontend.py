"""The ``acp`` plugin: loading it starts nothing, ``run`` serves one client until its
input ends, ``dsh acp`` finds (or starts) the front-end, names load lazily."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import text_block
from acp._transport import memory_transport_pair
from acp.client.connection import ClientSideConnection

import dsh_acp
from dsh import CommandError, ConfigError, Context
from dsh.testing import capture_logs
from dsh_acp import EXIT_FAILED, EXIT_OK, AcpFrontend
from dsh_acp._cli import frontend_for
from dsh_agent_core import AgentCore
from dsh_stdio_agent import StdioAgent
from tests.plugins.acp.acp_support import RecordingClient, acp_root

pytestmark = pytest.mark.anyio


async def test_loading_starts_nothing_and_disposing_leaves_nothing() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        fiber = root.plugin(AcpFrontend)
        await fiber
        assert isinstance(root.frontend, AcpFrontend)
        assert [a.id for a in root.agents.list()] == ["main"]
        assert not root.events.event("session/event").listeners()
        await fiber.dispose()
        assert root.get("frontend") is None


async def test_an_unknown_config_key_fails_the_plugin() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        with pytest.raises(ConfigError, match="agnet"):
            await root.plugin(AcpFrontend, {"agnet": "main"})


async def test_run_without_an_agent_to_serve_fails_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with acp_root(core={"model": None}) as (root, _):
        assert await root.frontend.run() == EXIT_FAILED
    assert (
        capsys.readouterr().err
        == "dsh acp: there is no agent to serve (declare one in agent-core)\n"
    )


# The agent-client-protocol package's connections run on asyncio only.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_run_serves_a_client_until_its_input_ends(tmp_path: Path) -> None:
    async with acp_root("Hello!") as (root, _):
        agent_end, client_end = memory_transport_pair()
        client = RecordingClient()
        conn = ClientSideConnection(client.as_client(), client_end)
        status: list[int] = []
        async with anyio.create_task_group() as tg:

            async def serve() -> None:
                status.append(await root.frontend.run(agent_end))

            tg.start_soon(serve)
            await conn.initialize(protocol_version=1)
            session = (await conn.new_session(cwd=str(tmp_path))).session_id
            answer = await conn.prompt(session_id=session, prompt=[text_block("hi")])
            assert answer.stop_reason == "end_turn"
            assert client.text() == "Hello!"
            await conn.close()
        assert status == [EXIT_OK]
        assert [a.id for a in root.agents.list()] == ["main"]
        assert root.sessions.get(session) is None


async def test_an_agent_side_without_a_client_drops_its_updates(tmp_path: Path) -> None:
    async with acp_root("unheard") as (root, _):
        async with root.frontend.open_agent() as agent:
            session = (await agent.new_session(cwd=str(tmp_path))).session_id
            with capture_logs("dsh.acp") as logs:
                answer = await agent.prompt(prompt=[text_block("hi")], session_id=session)
        assert answer.stop_reason == "end_turn"
    assert any("not connected to a client" in m for m in logs.messages())


async def test_dsh_acp_starts_the_front_end_when_the_deployment_has_none(tmp_path: Path) -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        front = await frontend_for(root, tmp_path / "dsh.yml")
        assert isinstance(front, AcpFrontend)
        assert await frontend_for(root, tmp_path / "dsh.yml") is not None


async def test_dsh_acp_needs_agents_and_no_other_front_end(tmp_path: Path) -> None:
    path = tmp_path / "dsh.yml"
    async with Context() as root:
        with pytest.raises(CommandError, match=r"dsh\.yml: there is no agent to serve"):
            await frontend_for(root, path)
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        await root.plugin(StdioAgent)
        with pytest.raises(CommandError, match=r'another front-end \("stdio-agent"\)'):
            await frontend_for(root, path)


def test_the_protocol_names_load_on_first_use() -> None:
    assert dsh_acp.AcpAgent.__name__ == "AcpAgent"
    assert dsh_acp.tool_kind("bash") == "execute"
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = dsh_acp.nothing
