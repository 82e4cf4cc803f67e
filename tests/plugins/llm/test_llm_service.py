"""The ``Llm`` service on a real runtime: the adapter registry and ``stream``.

Registration is all-or-nothing and returns the exact disposer; ``stream`` routes by
model through the ``llm/request`` waterfall and turns every failure past it into one
final ``Finish("error")`` chunk, while cancellation still propagates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import aclosing
from typing import Any

import anyio
import pytest

import dsh
import dsh_llm
from dsh import ConfigError, Context, DshError
from dsh.testing import ScriptedModel
from dsh_llm import (
    AdapterRegistrationError,
    AdapterTypeError,
    Chunk,
    DuplicateAdapterError,
    Finish,
    Llm,
    LlmConfig,
    LlmError,
    LlmFailure,
    LlmRequest,
    LlmRequestError,
    TextDelta,
    Usage,
    UsageChunk,
)
from tests.plugins.llm.llm_support import collect, request

pytestmark = pytest.mark.anyio


class Closing:
    """An adapter that plays ``chunks``, then raises ``error`` (if any), and notes when
    its stream is closed (the plain scripted model serves every other test)."""

    def __init__(self, chunks: Sequence[Chunk], error: BaseException | None = None) -> None:
        self.chunks = list(chunks)
        self.error = error
        self.closed = False

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        try:
            for chunk in self.chunks:
                yield chunk
            if self.error is not None:
                raise self.error
        finally:
            self.closed = True


def answer_chunks(text: str) -> list[Chunk]:
    return [TextDelta(0, text), UsageChunk(Usage(1, 1)), Finish("stop")]


async def start_llm(root: Context) -> Llm:
    await root.plugin(Llm)
    llm: Llm = root.llm
    return llm


def changes(root: Context) -> list[list[str]]:
    """Record ``llm.models()`` at each ``llm/adapters-change``."""
    seen: list[list[str]] = []
    root.on("llm/adapters-change", lambda: seen.append(root.llm.models()))
    return seen


# --- the plugin --------------------------------------------------------------------------


async def test_the_package_plugin_is_the_service() -> None:
    assert dsh_llm.plugin is Llm
    assert Llm.key == "llm"
    assert Llm.Config is LlmConfig
    async with Context() as root:
        llm = await start_llm(root)
        assert llm.models() == []


async def test_the_plugin_takes_no_config() -> None:
    async with Context() as root:
        await root.plugin(Llm, {})
        assert root.llm.models() == []
    async with Context() as root:
        with pytest.raises(ConfigError, match=r"Extra inputs are not permitted \(at retries\)"):
            await root.plugin(Llm, {"retries": 3})
        assert root.get("llm") is None


# --- declared context windows ------------------------------------------------------------


class Declaring(Closing):
    """An adapter whose ``context_window`` answers ``window`` for every model."""

    def __init__(self, window: object) -> None:
        super().__init__([])
        self.window = window

    def context_window(self, model: str) -> object:
        return self.window


async def test_context_window_is_what_the_serving_adapter_declares() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        llm.register_adapter("plain", Closing([]))
        llm.register_adapter("big", Declaring(128_000))
        for model, window in [("zero", 0), ("text", "8k"), ("flag", True), ("none", None)]:
            llm.register_adapter(model, Declaring(window))
        assert llm.context_window("big") == 128_000
        assert llm.context_window("scripted") is None  # no adapter serves it
        assert llm.context_window("plain") is None  # it declares nothing
        for model in ("zero", "text", "flag", "none"):
            assert llm.context_window(model) is None, model
        llm.register_adapter("scripted", ScriptedModel(window=4096))
        assert llm.context_window("scripted") == 4096


class Finding(Declaring):
    """An adapter that knows ``window`` once asked (``find_context_window``)."""

    def __init__(self, window: object) -> None:
        super().__init__(None)
        self.found = window
        self.asked: list[str] = []

    async def find_context_window(self, model: str) -> object:
        self.asked.append(model)
        self.window = self.found
        return self.found


async def test_find_context_window_lets_the_adapter_ask_first() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        finding = Finding(32_768)
        llm.register_adapter("probed", finding)
        llm.register_adapter("big", Declaring(128_000))
        llm.register_adapter("plain", Closing([]))
        llm.register_adapter("junk", Finding("32k"))
        assert llm.context_window("probed") is None  # not asked yet
        assert await llm.find_context_window("probed") == 32_768
        assert finding.asked == ["probed"]
        assert llm.context_window("probed") == 32_768
        # Without the method, what the adapter declares; nothing without an adapter.
        assert await llm.find_context_window("big") == 128_000
        assert await llm.find_context_window("plain") is None
        assert await llm.find_context_window("nobody") is None
        assert await llm.find_context_window("junk") is None


# --- registration ------------------------------------------------------------------------


async def test_register_routes_models_and_returns_the_exact_disposer() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        seen = changes(root)
        adapter = ScriptedModel(answer_chunks("a"))
        d = llm.register_adapter(["zeta", "alpha"], adapter)
        assert type(d) is dsh.Disposer
        assert llm.models() == ["alpha", "zeta"]
        assert seen == [["alpha", "zeta"]]
        assert await collect(llm, request("zeta")) == answer_chunks("a")
        await d()
        assert llm.models() == []
        assert seen == [["alpha", "zeta"], []]
        await d()  # a second call undoes nothing more
        assert seen == [["alpha", "zeta"], []]


async def test_a_single_string_serves_one_model() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        llm.register_adapter("solo", ScriptedModel())
        assert llm.models() == ["solo"]


async def test_a_composite_adopts_the_disposer_and_undoes_lifo() -> None:
    log: list[object] = []
    captured: list[dsh.Disposer] = []

    def adapter_plugin(ctx: Context, config: None) -> None:
        def wiring() -> Iterator[Callable[[], object]]:
            d = ctx.llm.register_adapter(["m"], ScriptedModel())
            captured.append(d)
            yield d
            yield lambda: log.append("undone after the adapter was registered")

        ctx.effect(wiring)

    async with Context() as root:
        llm = await start_llm(root)
        root.on("llm/adapters-change", lambda: log.append(("change", llm.models())))
        fiber = root.plugin(adapter_plugin)
        await fiber
        assert log == [("change", ["m"])]
        assert type(captured[0]) is dsh.Disposer
        await fiber.dispose()
        # Adopted: undone inside the composite, after what was yielded later. A
        # sibling effect would have been undone first (it was created last).
        assert log == [
            ("change", ["m"]),
            "undone after the adapter was registered",
            ("change", []),
        ]


@pytest.mark.parametrize(
    ("models", "error", "message"),
    [
        ([], AdapterRegistrationError, "an adapter must serve at least one model"),
        (["ok", ""], AdapterRegistrationError, "adapter model names must be non-empty"),
        (["ok", 3], AdapterTypeError, "adapter model names must be strings, got int 3"),
        (["ok", None], AdapterTypeError, "adapter model names must be strings, got NoneType"),
        (
            ["a", "b", "a", "b"],
            AdapterRegistrationError,
            "adapter model names repeat: a, b (in ['a', 'b', 'a', 'b'])",
        ),
        (["new", "taken"], DuplicateAdapterError, 'an adapter for model "taken" is already'),
    ],
)
async def test_registration_is_all_or_nothing(
    models: list[Any], error: type[Exception], message: str
) -> None:
    async with Context() as root:
        llm = await start_llm(root)
        llm.register_adapter(["taken"], ScriptedModel())
        seen = changes(root)
        with pytest.raises(error) as caught:
            llm.register_adapter(models, ScriptedModel())
        assert str(caught.value).startswith(message)
        assert type(caught.value) is error
        assert llm.models() == ["taken"]
        assert seen == []


async def test_an_adapter_without_stream_is_a_type_error() -> None:
    class NoStream:
        stream = "not callable"

    async with Context() as root:
        llm = await start_llm(root)
        for bad in (object(), NoStream()):
            with pytest.raises(AdapterTypeError, match=r"has no stream\(request\) method"):
                llm.register_adapter(["m"], bad)  # type: ignore[arg-type]  # the point
        assert llm.models() == []


def test_registration_error_classes() -> None:
    assert issubclass(AdapterRegistrationError, DshError)
    assert issubclass(AdapterRegistrationError, ValueError)
    assert AdapterRegistrationError.code == "INVALID_ADAPTER"
    assert issubclass(AdapterTypeError, AdapterRegistrationError)
    assert issubclass(AdapterTypeError, TypeError)
    assert AdapterTypeError.code == "INVALID_ADAPTER"
    assert issubclass(DuplicateAdapterError, AdapterRegistrationError)
    assert DuplicateAdapterError.code == "DUPLICATE_ADAPTER"
    assert issubclass(LlmRequestError, TypeError)
    assert LlmRequestError.code == "INVALID_REQUEST"


async def test_a_change_listener_that_raises_rolls_the_registration_back() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        calls: list[int] = []

        def veto() -> None:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("vetoed")

        root.on("llm/adapters-change", veto)
        with pytest.raises(RuntimeError, match="vetoed"):
            llm.register_adapter(["m"], ScriptedModel())
        await root.settle()
        assert llm.models() == []
        assert len(calls) == 2  # the registration, then its rollback
        llm.register_adapter(["m"], ScriptedModel())  # the name is free again
        assert llm.models() == ["m"]


async def test_a_model_is_free_again_after_its_adapter_is_removed() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        first = ScriptedModel(answer_chunks("first"))
        second = ScriptedModel(answer_chunks("second"))
        await llm.register_adapter(["m", "n"], first)()
        llm.register_adapter(["m"], second)
        assert await collect(llm, request("m")) == answer_chunks("second")
        assert first.requests == []


async def test_mounting_and_disposing_an_adapter_plugin_restores_the_registry() -> None:
    class AdapterPlugin(dsh.Plugin):
        inject = ("llm",)

        def setup(self) -> Iterator[dsh.Disposer]:
            yield self.ctx.llm.register_adapter(["p1", "p2"], ScriptedModel())

    async with Context() as root:
        llm = await start_llm(root)
        llm.register_adapter(["base"], ScriptedModel())
        before = dict(llm._routes)
        seen = changes(root)
        fiber = root.plugin(AdapterPlugin)
        await fiber
        assert llm.models() == ["base", "p1", "p2"]
        await fiber.dispose()
        assert llm._routes == before
        assert seen == [["base", "p1", "p2"], ["base"]]


# --- stream: routing ---------------------------------------------------------------------


async def test_stream_routes_by_model() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        one, two = ScriptedModel(answer_chunks("one")), ScriptedModel(answer_chunks("two"))
        llm.register_adapter(["a"], one)
        llm.register_adapter(["b", "c"], two)
        req = request("c", system="sys", turn=2, step=3)
        assert await collect(llm, req) == answer_chunks("two")
        assert await collect(llm, request("a")) == answer_chunks("one")
        assert two.requests == [req]
        assert [r.model for r in one.requests] == ["a"]


async def test_an_unknown_model_is_one_no_adapter_finish() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        assert await collect(llm, request("ghost")) == [
            Finish(
                "error",
                LlmFailure('no adapter serves model "ghost"; known models: (none)', "NO_ADAPTER"),
            )
        ]
        llm.register_adapter(["b"], ScriptedModel())
        llm.register_adapter(["a"], ScriptedModel())
        [finish] = await collect(llm, request("ghost"))
        assert isinstance(finish, Finish)
        assert finish.failure == LlmFailure(
            'no adapter serves model "ghost"; known models: a, b', "NO_ADAPTER"
        )


# --- stream: failures --------------------------------------------------------------------


class CodedError(DshError):
    code = "CUSTOM_CODE"


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (
            LlmError(LlmFailure("quota", "RATE_LIMIT", status=429, retry_after_ms=10)),
            LlmFailure("quota", "RATE_LIMIT", status=429, retry_after_ms=10),
        ),
        (CodedError("custom"), LlmFailure("model call failed: custom", "CUSTOM_CODE")),
        (ValueError("bad json"), LlmFailure("model call failed: bad json", "ADAPTER_ERROR")),
        (KeyError(), LlmFailure("model call failed: KeyError", "ADAPTER_ERROR")),
    ],
)
async def test_an_adapter_raising_mid_stream_ends_with_one_error_finish(
    error: Exception, failure: LlmFailure
) -> None:
    async with Context() as root:
        llm = await start_llm(root)
        adapter = Closing([TextDelta(0, "par"), TextDelta(0, "tial")], error)
        llm.register_adapter(["m"], adapter)
        assert await collect(llm, request()) == [
            TextDelta(0, "par"),
            TextDelta(0, "tial"),
            Finish("error", failure),
        ]
        assert adapter.closed


async def test_an_adapter_whose_stream_call_raises() -> None:
    class Broken:
        def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
            raise RuntimeError("cannot connect")

    async with Context() as root:
        llm = await start_llm(root)
        llm.register_adapter(["m"], Broken())
        assert await collect(llm, request()) == [
            Finish("error", LlmFailure("model call failed: cannot connect", "ADAPTER_ERROR"))
        ]


async def test_cancellation_propagates_and_is_not_a_finish() -> None:
    class Hang:
        def __init__(self) -> None:
            self.cleaned = False

        async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
            try:
                yield TextDelta(0, "before")
                await anyio.sleep_forever()
            finally:
                self.cleaned = True

    async with Context() as root:
        llm = await start_llm(root)
        adapter = Hang()
        llm.register_adapter(["m"], adapter)
        got: list[Chunk] = []
        with anyio.CancelScope() as scope:
            async with aclosing(llm.stream(request())) as chunks:
                async for chunk in chunks:
                    got.append(chunk)
                    scope.cancel()
        assert scope.cancelled_caught
        assert got == [TextDelta(0, "before")]
        assert adapter.cleaned


async def test_closing_the_stream_early_closes_the_adapter_stream() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        adapter = Closing(answer_chunks("long"))
        llm.register_adapter(["m"], adapter)
        async with aclosing(llm.stream(request())) as chunks:
            async for chunk in chunks:
                assert chunk == TextDelta(0, "long")
                break
            assert not adapter.closed  # still suspended inside the adapter
        assert adapter.closed


async def test_an_adapter_stream_without_aclose_is_fine() -> None:
    class Iter:
        def __init__(self, chunks: list[Chunk]) -> None:
            self.chunks = chunks

        def __aiter__(self) -> Iter:
            return self

        async def __anext__(self) -> Chunk:
            if not self.chunks:
                raise StopAsyncIteration
            return self.chunks.pop(0)

    class Plain:
        def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
            return Iter(answer_chunks("plain"))

    async with Context() as root:
        llm = await start_llm(root)
        llm.register_adapter(["m"], Plain())
        assert await collect(llm, request()) == answer_chunks("plain")
        async with aclosing(llm.stream(request())) as chunks:
            async for _ in chunks:
                break


# --- stream: the llm/request waterfall ---------------------------------------------------


async def test_the_request_waterfall_replaces_the_request_and_reroutes() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        original, other = (
            ScriptedModel(answer_chunks("orig")),
            ScriptedModel(answer_chunks("other")),
        )
        llm.register_adapter(["m"], original)
        llm.register_adapter(["other"], other)
        seen: list[LlmRequest] = []

        async def reroute(req: LlmRequest, call_next: Callable[[], Any]) -> LlmRequest:
            seen.append(req)
            inner: LlmRequest = await call_next()
            assert inner is req
            return dataclasses.replace(req, model="other", system="rewritten")

        root.on("llm/request", reroute)
        req = request("m")
        assert await collect(llm, req) == answer_chunks("other")
        assert seen == [req]
        assert original.requests == []
        assert other.requests == [dataclasses.replace(req, model="other", system="rewritten")]


async def test_a_waterfall_reroute_to_an_unknown_model_names_it() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        llm.register_adapter(["m"], ScriptedModel())
        root.on("llm/request", lambda req, call_next: dataclasses.replace(req, model="nope"))
        [finish] = await collect(llm, request("m"))
        assert isinstance(finish, Finish)
        assert finish.failure is not None
        assert finish.failure.message == 'no adapter serves model "nope"; known models: m'


async def test_the_waterfall_listener_errors_propagate() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        llm.register_adapter(["m"], ScriptedModel())

        def refuse(req: LlmRequest, call_next: Any) -> LlmRequest:
            raise PermissionError("blocked by policy")

        root.on("llm/request", refuse)
        with pytest.raises(PermissionError, match="blocked by policy"):
            await collect(llm, request())


async def test_a_waterfall_returning_something_else_is_an_error() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        root.on("llm/request", lambda req, call_next: {"model": "m"})
        with pytest.raises(
            LlmRequestError,
            match=r"an llm/request listener returned dict instead of a dsh_llm\.LlmRequest",
        ):
            await collect(llm, request())


async def test_stream_refuses_a_non_request() -> None:
    async with Context() as root:
        llm = await start_llm(root)
        bad: Any = {"model": "m"}
        with pytest.raises(
            LlmRequestError, match=r"llm\.stream needs a dsh_llm\.LlmRequest, got dict"
        ):
            await collect(llm, bad)
