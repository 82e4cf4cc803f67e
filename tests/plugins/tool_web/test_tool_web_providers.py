"""``web_search`` is offered only while the web service has a search provider to use
(it follows providers coming and going), and ``dsh check`` warns when it is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh import Context, cli
from dsh.testing import write_deployment
from dsh_system_prompt import SystemPrompt
from dsh_tool_web import ToolWeb
from dsh_tools import Tools
from dsh_web import Web
from tests.plugins.web.web_support import StubFetcher, StubSearcher

pytestmark = pytest.mark.anyio


async def offered(root: Context) -> tuple[list[str], list[str]]:
    """The web tools and their sections in the assembled prompt."""
    assembly = await root.system_prompt.assemble()
    sections = [s.name for s in assembly.sections if s.name.startswith("tool:web")]
    return [t.name for t in assembly.tools if t.name.startswith("web_")], sections


SEARCH = (["web_search"], ["tool:web_search"])
NONE: tuple[list[str], list[str]] = ([], [])


@pytest.mark.parametrize("configured", [None, "x"])
async def test_web_search_comes_and_goes_with_the_search_provider(configured: str | None) -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Web, {"search_provider": configured})
        await root.plugin(ToolWeb, {"fetch": False})
        assert await offered(root) == NONE
        if configured is not None:
            # Another provider than the configured one is none to use.
            other = root.web.register_search_provider(StubSearcher("y"))
            assert await offered(root) == NONE
            other()
        dispose = root.web.register_search_provider(StubSearcher("x"))
        assert await offered(root) == SEARCH
        # A second one (ambiguous or not) leaves the mounted tool as it is.
        second = root.web.register_search_provider(StubSearcher("z"))
        second()
        assert await offered(root) == SEARCH
        dispose()
        assert await offered(root) == NONE
        root.web.register_search_provider(StubSearcher("x"))
        assert await offered(root) == SEARCH


async def test_fetch_providers_do_not_touch_web_search() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Web)
        await root.plugin(ToolWeb, {"fetch": False})
        dispose = root.web.register_fetch_provider(StubFetcher())
        assert await offered(root) == NONE
        dispose()


@pytest.mark.parametrize(
    ("provider", "warned"),
    [
        ("", True),
        # A provider that is never asked anything at check time (nothing listens there).
        ('- {id: searxng, name: web-searxng, config: {base_url: "http://127.0.0.1:9"}}\n', False),
    ],
)
def test_dsh_check_warns_while_web_search_is_not_offered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str, warned: bool
) -> None:
    path = write_deployment(
        tmp_path,
        "- {id: agent-core, name: agent-core, config: {model: m}}\n"
        "- {id: web, name: web}\n"
        "- {id: web-fetch, name: web-fetch}\n"
        "- id: tool-web\n"
        "  name: tool-web\n" + provider,
    )
    cli.main(["check", str(path)])
    err = capsys.readouterr().err
    warning = (
        f"warning: {path}:4: tool-web offers no web_search: the web service has no search "
        "provider to use (load one, such as web-searxng, or set search: false)\n"
    )
    assert (warning in err) is warned
    assert ("web_search" in err) is warned
