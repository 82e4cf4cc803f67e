"""``otel`` as a plugin: where spans go (the host's provider, else the configured
exporter), ``enabled: false``, disposal, and the import error naming the extra."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import anyio
import pytest
from opentelemetry import trace

import dsh_otel
from dsh import ConfigError, Context, PluginLoadError, load_deployment
from dsh.testing import Mark, ScriptedModel, Wait, run_turn, write_deployment
from dsh_agent_core import AgentCore
from dsh_otel import Otel, OtelConfig
from tests.http_support import Loopback, QuietHandler
from tests.plugins.otel.otel_support import Spans

pytestmark = pytest.mark.anyio

#: The events the plugin listens to.
EVENTS = (
    "agent/turn-start",
    "agent/turn-end",
    "tool/before",
    "tool/after",
    "llm/start",
    "llm/response",
)


async def core(root: Context) -> ScriptedModel:
    await root.plugin(AgentCore, {"model": "m"})
    model = ScriptedModel(models=["m"])
    model.install(root)
    return model


def listening(root: Context) -> dict[str, int]:
    return {name: len(root.events.event(name).listeners()) for name in EVENTS}


async def test_the_host_provider_is_used_as_it_is_and_not_shut_down(host_spans: Spans) -> None:
    async with Context() as root:
        model = await core(root)
        await root.plugin(Otel, {"exporter": "console"})
        model.reply("hi")
        await run_turn(root.agents.get("main"), "go")
    assert host_spans.names() == ["chat m", "invoke_agent main"]
    # Still open for the host's own spans after the plugin unloaded.
    host_spans.provider.get_tracer("host").start_span("after").end()
    assert host_spans.names()[-1] == "after"


def no_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)


async def test_without_a_host_provider_the_console_exporter_prints_each_span(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_host(monkeypatch)
    async with Context() as root:
        model = await core(root)
        await root.plugin(Otel, {"exporter": "console", "service_name": "demo"})
        model.reply("hi")
        await run_turn(root.agents.get("main"), "go")
    printed = capsys.readouterr().out
    assert '"name": "chat m"' in printed
    assert '"name": "invoke_agent main"' in printed
    assert '"service.name": "demo"' in printed


class Collector(QuietHandler):
    """An OTLP/HTTP endpoint on 127.0.0.1 that keeps what it is sent."""

    received: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    received: list[tuple[str, dict[str, str], bytes]] = []
    handler = type("Handler", (Collector,), {"received": received})
    server = Loopback(handler)
    try:
        yield f"{server.root}/v1/traces", received
    finally:
        server.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_otlp_exporter_sends_to_the_endpoint_with_the_headers_on_unload(
    monkeypatch: pytest.MonkeyPatch,
    collector: tuple[str, list[tuple[str, dict[str, str], bytes]]],
) -> None:
    endpoint, received = collector
    no_host(monkeypatch)
    async with Context() as root:
        model = await core(root)
        config = {"endpoint": endpoint, "headers": {"x-api-key": "k1"}}
        await root.plugin(Otel, config)
        model.reply("hi")
        await run_turn(root.agents.get("main"), "go")
    # The unload flushed the batch.
    ((path, headers, body),) = received
    assert path == "/v1/traces"
    assert headers["x-api-key"] == "k1"
    assert headers["content-type"] == "application/x-protobuf"
    assert b"invoke_agent main" in body
    assert b"chat m" in body


async def test_enabled_false_listens_to_nothing(host_spans: Spans) -> None:
    async with Context() as root:
        model = await core(root)
        before = listening(root)
        await root.plugin(Otel, {"enabled": False})
        assert listening(root) == before
        model.reply("hi")
        await run_turn(root.agents.get("main"), "go")
    assert host_spans.names() == []


async def test_disposal_removes_every_listener_and_ends_the_open_spans(host_spans: Spans) -> None:
    async with Context() as root:
        model = await core(root)
        before = listening(root)
        fiber = await root.plugin(Otel)
        assert all(listening(root)[name] == before[name] + 1 for name in EVENTS)
        hold, started = anyio.Event(), anyio.Event()
        model.reply([Mark(started), Wait(hold)])
        agent = root.agents.get("main")
        agent.send("go")
        await started.wait()
        await fiber.dispose()
        assert listening(root) == before
        assert sorted(host_spans.names()) == ["chat m", "invoke_agent main"]
        agent.cancel()
        await agent.when_idle()
    assert sorted(host_spans.names()) == ["chat m", "invoke_agent main"]


async def test_without_the_sdk_the_plugin_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "dsh_otel._spans")
    monkeypatch.delattr(dsh_otel, "_spans")
    async with Context() as root:
        await core(root)
        with pytest.raises(PluginLoadError) as info:
            await root.plugin(Otel)
    assert "pip install 'dsh-harness[otel]'" in str(info.value)


async def test_unknown_keys_and_exporters_are_config_errors() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        with pytest.raises(ConfigError):
            await root.plugin(Otel, {"exporter": "zipkin"})
        with pytest.raises(ConfigError):
            await root.plugin(Otel, {"capture": True})


def test_the_package_exports_the_plugin() -> None:
    assert dsh_otel.plugin is Otel
    assert OtelConfig().model_dump() == {
        "enabled": True,
        "exporter": "otlp",
        "endpoint": None,
        "protocol": "http/protobuf",
        "headers": {},
        "service_name": "dsh",
        "capture_content": False,
    }


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_yaml_deployment_exports_with_headers_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    collector: tuple[str, list[tuple[str, dict[str, str], bytes]]],
) -> None:
    endpoint, received = collector
    no_host(monkeypatch)
    monkeypatch.setenv("DSH_TEST_OTEL_KEY", "from-env")
    path = write_deployment(
        tmp_path,
        f"""\
        - {{id: core, name: agent-core, config: {{model: m}}}}
        - id: otel
          name: otel
          config:
            endpoint: {endpoint}
            headers: {{x-api-key: !env DSH_TEST_OTEL_KEY}}
        """,
    )
    async with Context() as root:
        await load_deployment(path, root)
        model = ScriptedModel("hi", models=["m"])
        model.install(root)
        await run_turn(root.agents.get("main"), "go")
    ((_, headers, body),) = received
    assert headers["x-api-key"] == "from-env"
    assert b"invoke_agent main" in body
