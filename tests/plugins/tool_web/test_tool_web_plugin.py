"""The ``tool-web`` plugin: which tools and sections it adds, and that unloading removes them."""

from __future__ import annotations

from typing import Any

import pytest

from dsh import ConfigError, Context, FiberState
from dsh.testing import state
from dsh_system_prompt import PromptAssembly, SystemPrompt
from dsh_tool_web import (
    FETCH_DESCRIPTION,
    FETCH_GUIDANCE,
    SEARCH_DESCRIPTION,
    SEARCH_GUIDANCE,
    ToolWeb,
)
from dsh_tools import Tools
from dsh_web import Web
from tests.plugins.tool_web.tool_web_support import web_tools
from tests.plugins.web.web_support import StubFetcher, StubSearcher

pytestmark = pytest.mark.anyio


def shown(assembly: PromptAssembly) -> tuple[list[tuple[str, float]], list[str]]:
    sections = [(s.name, s.order) for s in assembly.sections if s.name.startswith("tool:")]
    return sections, [t.name for t in assembly.tools]


async def test_both_tools_and_their_guidance_by_default() -> None:
    async with web_tools(StubFetcher(), StubSearcher()) as web:
        assembly = await web.root.system_prompt.assemble()
    assert shown(assembly) == (
        [("tool:web_search", 110), ("tool:web_fetch", 111)],
        ["web_fetch", "web_search"],
    )
    texts = {s.name: s.text for s in assembly.sections}
    assert texts["tool:web_search"] == SEARCH_GUIDANCE
    assert texts["tool:web_fetch"] == FETCH_GUIDANCE
    schemas = {t.name: t for t in assembly.tools}
    assert schemas["web_fetch"].description == FETCH_DESCRIPTION
    assert schemas["web_search"].description == SEARCH_DESCRIPTION
    assert list(schemas["web_fetch"].parameters["properties"]) == ["url"]
    queries = schemas["web_search"].parameters["properties"]["queries"]
    assert (queries["type"], queries["minItems"], queries["maxItems"]) == ("array", 1, 4)


@pytest.mark.parametrize(
    ("config", "sections", "tools"),
    [
        ({"search": False}, [("tool:web_fetch", 111)], ["web_fetch"]),
        ({"fetch": False}, [("tool:web_search", 110)], ["web_search"]),
        ({"fetch": False, "search": False}, [], []),
    ],
)
async def test_a_disabled_tool_is_not_registered(
    config: dict[str, bool], sections: list[tuple[str, int]], tools: list[str]
) -> None:
    async with web_tools(StubFetcher(), StubSearcher(), **config) as web:
        assert shown(await web.root.system_prompt.assemble()) == (sections, tools)


async def test_unloading_removes_every_tool_and_section() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Web)
        before = shown(await root.system_prompt.assemble())
        fiber = await root.plugin(ToolWeb)
        assert shown(await root.system_prompt.assemble()) != before
        await fiber.dispose()
        assert shown(await root.system_prompt.assemble()) == before == ([], [])


async def test_it_waits_for_the_web_seam_and_never_starts_it() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        fiber = await root.plugin(ToolWeb)
        assert fiber.state is FiberState.PENDING
        assert root.get("web") is None
        web = await root.plugin(Web)
        await fiber
        assert state(fiber) is FiberState.ACTIVE
        await web.dispose()
        assert state(fiber) is FiberState.PENDING
        assert shown(await root.system_prompt.assemble()) == ([], [])


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"fetch": "maybe"}, r"\(at fetch\)"),
        ({"fetch_max_output_chars": 0}, r"greater than 0 \(at fetch_max_output_chars\)"),
        ({"search_max_results": 0}, r"greater than 0 \(at search_max_results\)"),
        ({"max_queries": 2}, r"Extra inputs are not permitted \(at max_queries\)"),
    ],
)
async def test_bad_configs_fail_the_plugin_naming_the_key(
    config: dict[str, Any], problem: str
) -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Web)
        with pytest.raises(ConfigError, match=problem) as info:
            await root.plugin(ToolWeb, config)
        assert "tool-web" in str(info.value)
        assert shown(await root.system_prompt.assemble()) == ([], [])
