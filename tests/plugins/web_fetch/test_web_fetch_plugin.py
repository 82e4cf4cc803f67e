"""The ``web-fetch`` plugin: mounting, disposal, config, time limits and failures."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh import Context, FiberState, load_deployment
from dsh.testing import until, write_deployment
from dsh_web import FetchResult, Web, WebFetchError, WebTimeoutError
from dsh_web_fetch import HttpFetcher, WebFetch
from tests.plugins.web.web_support import Gate, Site, assert_config_refused
from tests.plugins.web_fetch.fetch_support import mounted
from tests.support import entry_after, failed_deployment

pytestmark = pytest.mark.anyio


async def test_mounting_registers_the_provider_and_disposing_removes_it() -> None:
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        before = web.fetch_providers()
        fiber = await root.plugin(WebFetch, {"id": "direct"})
        assert fiber.state is FiberState.ACTIVE
        (provider,) = web.fetch_providers()
        assert isinstance(provider, HttpFetcher)
        assert provider.id == "direct"
        await fiber.dispose()
        assert web.fetch_providers() == before


async def test_the_plugin_waits_for_the_web_service() -> None:
    async with Context() as root:
        fiber = await root.plugin(WebFetch)
        assert fiber.state is FiberState.PENDING
        await root.plugin(Web)
        await fiber
        assert [p.id for p in root.web.fetch_providers()] == ["http"]


async def test_disposal_lets_a_fetch_in_flight_finish_first(site: Site) -> None:
    gate = Gate()
    site.answer("/slow", gate)
    results: list[FetchResult] = []
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        fiber = await root.plugin(WebFetch, {"allow_private": True})

        async def fetch() -> None:
            results.append(await web.fetch(site.url("/slow")))

        async with anyio.create_task_group() as group:
            group.start_soon(fetch)
            await gate.wait_arrived()
            unloading = fiber.dispose()
            # The provider goes at once; the client stays open for the fetch.
            await until(lambda: web.fetch_providers() == [])
            assert not results
            gate.release.set()
            await unloading
    assert [r.content for r in results] == ["late"]


async def test_a_fetch_longer_than_the_time_limit_fails(site: Site) -> None:
    gate = Gate()
    site.answer("/stall", gate)
    try:
        async with mounted(allow_private=True, timeout_seconds=0.2) as web:
            with pytest.raises(WebTimeoutError) as info:
                await web.fetch(site.url("/stall"))
    finally:
        gate.release.set()
    assert str(info.value) == f"fetching {site.url('/stall')} took longer than 0.2 s"
    assert info.value.code == "WEB_TIMEOUT"


async def test_a_refused_connection_fails_the_fetch() -> None:
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with mounted(allow_private=True) as web:
        with pytest.raises(WebFetchError) as info:
            await web.fetch(f"http://127.0.0.1:{port}/")
    assert str(info.value).startswith(f"fetching http://127.0.0.1:{port}/ failed: ")
    assert info.value.code == "WEB_FETCH_FAILED"


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"max_bytes": 0}, r"greater than 0 \(at max_bytes\)"),
        ({"timeout_seconds": 0}, r"greater than 0 \(at timeout_seconds\)"),
        ({"max_redirects": -1}, r"\(at max_redirects\)"),
        ({"id": ""}, r"\(at id\)"),
        ({"allow_private": "sometimes"}, r"\(at allow_private\)"),
        ({"allow_privat": True}, r"Extra inputs are not permitted \(at allow_privat\)"),
    ],
)
async def test_bad_configs_fail_the_plugin_naming_the_key(
    config: dict[str, Any], problem: str
) -> None:
    await assert_config_refused(WebFetch, "web-fetch", config, problem)


async def test_a_deployment_starts_it_by_its_yaml_name(site: Site, tmp_path: Path) -> None:
    site.page("/", "<h2>From YAML</h2>")
    path = write_deployment(
        tmp_path,
        """\
        - {id: web, name: web}
        - {id: fetch, name: web-fetch, config: {allow_private: true}}
        """,
    )
    async with Context() as root:
        await load_deployment(path, root)
        assert (await root.web.fetch(site.url("/"))).content == "## From YAML\n"


async def test_a_bad_deployment_entry_is_located(tmp_path: Path) -> None:
    entries = entry_after("- {id: web, name: web}", "fetch", "web-fetch", "{max_bytes: -5}")
    path, error = await failed_deployment(tmp_path, entries, absent="web")
    (failure,) = error.failures
    assert f"{path}:2: entry 'fetch'" in failure
    assert f"{path}:4: Input should be greater than 0 (at max_bytes)" in failure
