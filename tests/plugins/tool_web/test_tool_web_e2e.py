"""The web tools end to end: a deployment, a scripted model calling them, real HTTP to
loopback servers (a site and a fake SearXNG), and the example's prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh import Context, cli, load_deployment
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls, write_deployment
from dsh_tool_web import FETCH_GUIDANCE, SEARCH_GUIDANCE
from tests.plugins.web.web_support import Site, serving
from tests.support import EXAMPLES

pytestmark = pytest.mark.anyio


def deployment(tmp_path: Path, *entries: str) -> Path:
    """The spine on the scripted model, ``web``, and ``entries`` (one flow mapping each)."""
    lines = [
        "{id: agent-core, name: agent-core, config: {model: scripted}}",
        "{id: web, name: web}",
    ]
    return write_deployment(tmp_path, "".join(f"- {line}\n" for line in [*lines, *entries]))


async def test_the_model_fetches_a_page_and_reads_it_as_markdown(tmp_path: Path) -> None:
    with serving() as site:
        await fetch_a_menu(site, tmp_path)


async def fetch_a_menu(site: Site, tmp_path: Path) -> None:
    site.page("/menu.html", "<h1>Café menu</h1><ul><li>Tea</li></ul><script>x()</script>")
    url = site.url("/menu.html")
    path = deployment(
        tmp_path,
        "{id: fetch, name: web-fetch, config: {allow_private: true}}",
        "{id: tools, name: tool-web, config: {search: false}}",
    )
    model = ScriptedModel(tool_calls(tool_call("web_fetch", {"url": url})), text("Tea."))
    async with Context() as root:
        await load_deployment(path, root)
        model.install(root)
        assert await run_turn(root.agents.get("main"), "What is on the menu?") == {
            "kind": "completed"
        }
    first, second = model.requests
    assert [tool.name for tool in first.tools] == ["web_fetch"]
    result = second.messages[-1].content[0]
    assert (result.content, result.is_error) == (
        f"Fetched {url} (HTTP 200)\n\n# Café menu\n\n- Tea\n",
        False,
    )


async def test_the_model_searches_through_searxng(tmp_path: Path) -> None:
    with serving() as site:
        await search_for_dsh(site, tmp_path)


async def search_for_dsh(site: Site, tmp_path: Path) -> None:
    reply = {"results": [{"url": "https://dsh.test/", "title": "dsh", "content": "A harness."}]}
    site.page("/search", json.dumps(reply), content_type="application/json")
    path = deployment(
        tmp_path,
        f'{{id: searxng, name: web-searxng, config: {{base_url: "{site.root}"}}}}',
        "{id: tools, name: tool-web, config: {fetch: false}}",
    )
    model = ScriptedModel(
        tool_calls(tool_call("web_search", {"queries": ["what is dsh"]})), text("A harness.")
    )
    async with Context() as root:
        await load_deployment(path, root)
        model.install(root)
        await run_turn(root.agents.get("main"), "What is dsh?")
    result = model.requests[1].messages[-1].content[0]
    assert result.content == (
        "### what is dsh\nSources:\n- [dsh](https://dsh.test/) — A harness.\n\n"
        "Cite the relevant URLs above as markdown links in your answer."
    )
    assert site.requests[0].path == "/search?q=what+is+dsh&format=json"


#: The tool sections of ARCHITECTURE §6, in their order.
SECTION_ORDER = [
    "tool:read",
    "tool:write",
    "tool:edit",
    "tool:glob",
    "tool:grep",
    "tool:bash",
    "tool:jobs",
    "tool:web_search",
    "tool:web_fetch",
]
CODING_AGENT = EXAMPLES / "coding-agent" / "dsh.yml"


async def test_the_coding_agent_has_web_fetch_in_the_order_of_the_tool_band(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # its sessions live under ./.dsh
    async with Context() as root:
        await load_deployment(CODING_AGENT, root, environ={"DEEPSEEK_API_KEY": "sk-test"})
        agent = root.agents.get("main")
        assembly = await root.system_prompt.assemble(root.agents.assemble_context_for(agent))
    names = [section.name for section in assembly.sections if section.name.startswith("tool:")]
    assert "tool:web_fetch" in names
    assert "tool:web_search" not in names  # no search provider is configured
    assert names == sorted(names, key=SECTION_ORDER.index)
    tools = [tool.name for tool in assembly.tools]
    assert "web_fetch" in tools
    assert "web_search" not in tools


def test_dsh_prompt_shows_the_web_fetch_guidance_last_of_the_tool_band(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    assert cli.main(["prompt", "--json", str(CODING_AGENT)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["system"].endswith(FETCH_GUIDANCE)
    assert SEARCH_GUIDANCE not in doc["system"]
    assert "web_fetch" in [tool["name"] for tool in doc["tools"]]
