"""Config validation with pydantic at activation (ARCHITECTURE §3.5)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import pydantic
import pytest

from dsh import ConfigError, Context, DshError, FiberState, Plugin, cli
from dsh.testing import state, write_deployment
from tests.support import dsh_refused, entry_after

pytestmark = pytest.mark.anyio


class Leaf(pydantic.BaseModel):
    x: int = 1


class Open(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    leaf: Leaf = Leaf()


class Shape(pydantic.BaseModel):
    name: str = "shape"
    count: int = 0
    tags: list[str] = []
    leaf: Leaf = Leaf()
    leaves: list[Leaf] = []
    by_name: dict[str, Leaf] = {}
    by_id: dict[int, Leaf] = {}
    open: Open = Open()
    aliased: int = pydantic.Field(default=0, alias="Aliased")


class Shaped(Plugin):
    Config = Shape
    seen: ClassVar[list[Shape]] = []

    def setup(self) -> None:
        self.seen.append(self.config)


async def load_shaped(config: Any) -> Any:
    async with Context() as root:
        fiber = root.plugin(Shaped, config)
        try:
            await fiber
        except ConfigError as exc:
            assert state(fiber) is FiberState.FAILED
            return exc
        return fiber.config


async def test_defaults_are_applied() -> None:
    config = await load_shaped(None)
    assert config == Shape()
    config = await load_shaped({"count": 3, "leaves": [{}], "Aliased": 4})
    assert config.count == 3
    assert config.leaves == [Leaf(x=1)]
    assert config.aliased == 4


async def test_validation_happens_at_activation_and_config_is_none_until_then() -> None:
    async with Context() as root:
        fiber = root.plugin(Shaped, {"count": "many"})  # no error yet
        assert state(fiber) is FiberState.LOADING
        assert fiber.config is None
        with pytest.raises(ConfigError):
            await fiber

        class Waiting(Plugin):
            Config = Shape
            inject = ("missing",)

        pending = root.plugin(Waiting, {"count": 1})
        await pending
        assert state(pending) is FiberState.PENDING
        assert pending.config is None


async def test_config_error_names_the_plugin_and_lists_each_problem() -> None:
    exc = await load_shaped({"count": "many", "leaf": {"x": "wide"}, "leaves": [{}, {"x": []}]})
    assert isinstance(exc, ConfigError)
    assert isinstance(exc, ValueError)
    assert isinstance(exc, DshError)
    assert exc.code == "CONFIG_INVALID"
    lines = str(exc).splitlines()
    assert lines[0] == 'invalid config for plugin "Shaped":'
    assert lines[1:] == [
        "  - Input should be a valid integer, unable to parse string as an integer (at count)",
        "  - Input should be a valid integer, unable to parse string as an integer (at leaf.x)",
        "  - Input should be a valid integer (at leaves.1.x)",
    ]


async def test_a_config_that_is_not_a_mapping() -> None:
    exc = await load_shaped([1, 2])
    assert isinstance(exc, ConfigError)
    assert "(at <config>)" in str(exc)


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"colour": "red"}, "colour"),
        ({"leaf": {"y": 1}}, "leaf.y"),
        ({"leaves": [{}, {"y": 1}]}, "leaves.1.y"),
        ({"by_name": {"a": {"y": 1}}}, "by_name.a.y"),
        ({"by_id": {"1": {}, "2": {"y": 1}}}, "by_id.2.y"),  # keys coerced to int
        ({"open": {"anything": 1, "leaf": {"y": 2}}}, "open.leaf.y"),
    ],
)
async def test_unknown_keys_are_errors_at_every_level(config: Any, where: str) -> None:
    exc = await load_shaped(config)
    assert isinstance(exc, ConfigError)
    assert f"Extra inputs are not permitted (at {where})" in str(exc)
    assert len(str(exc).splitlines()) == 2  # exactly one problem


async def test_a_model_with_extra_allow_accepts_unknown_keys() -> None:
    config = await load_shaped({"open": {"anything": 1}, "tags": ["a"], "name": "n"})
    assert config.open.anything == 1
    assert config.tags == ["a"]


async def test_a_model_forbidding_extras_reports_through_pydantic() -> None:
    class Strict(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        a: int = 0

    class P(Plugin):
        Config = Strict

    async with Context() as root:
        with pytest.raises(ConfigError, match=r"Extra inputs are not permitted \(at b\)"):
            await root.plugin(P, {"b": 1})


async def test_a_validated_instance_passes() -> None:
    config = await load_shaped(Shape(count=9))
    assert config == Shape(count=9)


async def test_no_config_model_passes_the_raw_config_through() -> None:
    seen: list[Any] = []
    async with Context() as root:
        raw = {"anything": [1, 2]}
        fiber = await root.plugin(lambda ctx, config: seen.append(config), raw)
        assert seen == [raw]
        assert fiber.config is raw


class Entry:
    """A stand-in for a deployment entry (``dsh.EntryInfo``)."""

    where = "dsh.yml:3: entry 'shaped'"

    def locate(self, loc: Sequence[str | int]) -> str:
        return f"dsh.yml:{4 + len(loc)}"


async def test_config_error_of_a_deployment_entry_names_file_line_and_id() -> None:
    async with Context() as root:
        fiber = root._plugin(Shaped, {"leaf": {"x": "wide"}}, entry=Entry())
        with pytest.raises(ConfigError) as info:
            await fiber
    assert str(info.value).splitlines() == [
        "invalid config for plugin \"Shaped\" (dsh.yml:3: entry 'shaped'):",
        "  - dsh.yml:6: Input should be a valid integer, unable to parse string as an integer "
        "(at leaf.x)",
    ]


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    depth: int = 0


class Suggesting(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    tool_order: list[str] | None = None
    inner: Strict | None = None
    items: list[Strict] = []
    named: dict[str, Strict] = {}
    numbers: dict[str, int] = {}


class SuggestingPlugin(Plugin):
    Config = Suggesting


@pytest.mark.parametrize(
    ("config", "hint"),
    [
        ({"toolOrder": []}, '; did you mean "tool_order"?'),
        ({"inner": {"dpth": 1}}, '; did you mean "depth"?'),
        ({"items": [{"Depth": 1}]}, '; did you mean "depth"?'),
        ({"named": {"a": {"deep": 1}}}, '; did you mean "depth"?'),
        ({"qqqq": 1}, ""),  # nothing close
    ],
)
async def test_unknown_keys_suggest_the_closest_known_key_at_their_level(
    config: dict[str, Any], hint: str
) -> None:
    async with Context() as root:
        with pytest.raises(ConfigError) as info:
            await root.plugin(SuggestingPlugin, config)
    (line,) = [ln for ln in str(info.value).splitlines() if "Extra inputs" in ln]
    assert line.endswith(")" + hint)


def test_no_suggestion_where_the_level_is_not_a_model() -> None:
    from dsh._config import _did_you_mean

    # Below a dict of ints, or past an index into a model: no model's keys to offer.
    assert _did_you_mean(Suggesting, ("numbers", "a", "x")) == ""
    assert _did_you_mean(Suggesting, ("inner", 0, "x")) == ""
    assert _did_you_mean(Suggesting, (0,)) == ""


# -- strict numbers: a YAML boolean is not a number, nor a number a boolean ---------------


class Limits(pydantic.BaseModel):
    ratio: float = 0.5


class Numeric(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    count: int = 0
    ratio: float = 0.0
    amount: Decimal = Decimal(0)
    maybe: int | None = None
    either: int | bool = 0
    flag: bool = False
    anything: Any = None
    label: int | str = ""
    limits: Limits = Limits()
    sizes: list[int] = []
    pair: tuple[int, float] = (0, 0.0)
    by_name: dict[str, Limits] = {}
    weights: dict[str, float] = {}
    by_id: dict[int, str] = {}


class NumericPlugin(Plugin):
    Config = Numeric


async def load_numeric(config: Any, entry: Any = None) -> Any:
    async with Context() as root:
        fiber = root._plugin(NumericPlugin, config, entry=entry)
        try:
            await fiber
        except ConfigError as exc:
            return str(exc).splitlines()[1:]
        return fiber.config


NOT_A_NUMBER = "Input should be a valid number, not a boolean"
NOT_A_BOOL = "Input should be a valid boolean, not a number"
NOT_FINITE = "Input should be a finite number"


@pytest.mark.parametrize(
    ("config", "where", "problem"),
    [
        # a boolean where a number is expected
        ({"count": True}, "count", NOT_A_NUMBER),
        ({"count": False}, "count", NOT_A_NUMBER),
        ({"ratio": True}, "ratio", NOT_A_NUMBER),
        ({"maybe": True}, "maybe", NOT_A_NUMBER),
        ({"label": True}, "label", NOT_A_NUMBER),
        ({"limits": {"ratio": False}}, "limits.ratio", NOT_A_NUMBER),
        ({"sizes": [1, True, 3]}, "sizes.1", NOT_A_NUMBER),
        ({"pair": [1, True]}, "pair.1", NOT_A_NUMBER),
        ({"by_name": {"a": {}, "b": {"ratio": True}}}, "by_name.b.ratio", NOT_A_NUMBER),
        ({"weights": {"x": 1.5, "y": True}}, "weights.y", NOT_A_NUMBER),
        ({"by_id": {True: "yes"}}, "by_id.True", NOT_A_NUMBER),
        # a number where a boolean is expected
        ({"flag": 1}, "flag", NOT_A_BOOL),
        ({"flag": 0.0}, "flag", NOT_A_BOOL),
        ({"flag": Decimal(0)}, "flag", NOT_A_BOOL),
        # a float that is not finite
        ({"ratio": math.inf}, "ratio", NOT_FINITE),
        ({"ratio": "-inf"}, "ratio", NOT_FINITE),
        ({"limits": {"ratio": math.nan}}, "limits.ratio", NOT_FINITE),
        ({"weights": {"x": "nan"}}, "weights.x", NOT_FINITE),
        ({"anything": math.inf}, "anything", NOT_FINITE),
    ],
)
async def test_a_value_of_the_wrong_kind_is_refused_naming_its_place(
    config: dict[str, Any], where: str, problem: str
) -> None:
    assert await load_numeric(config) == [f"  - {problem} (at {where})"]


async def test_every_coerced_value_is_reported_with_its_place() -> None:
    assert await load_numeric({"count": True, "sizes": [False], "flag": 1}, Entry()) == [
        f"  - dsh.yml:5: {NOT_A_NUMBER} (at count)",
        f"  - dsh.yml:5: {NOT_A_BOOL} (at flag)",
        f"  - dsh.yml:6: {NOT_A_NUMBER} (at sizes.0)",
    ]


async def test_booleans_and_numbers_in_their_own_places_pass() -> None:
    config = await load_numeric(
        {
            "count": 3,
            "ratio": 2,  # an integer is a number
            "amount": "1.5",
            "either": True,  # a union that takes a boolean keeps it
            "flag": True,
            "anything": False,
            "sizes": [1, 2],
            "weights": {"x": 1},
        }
    )
    assert isinstance(config, Numeric)
    assert (config.count, config.ratio, config.amount) == (3, 2.0, Decimal("1.5"))
    assert config.either is True
    assert config.flag is True
    assert config.anything is False
    assert config.sizes == [1, 2]


async def test_numbers_and_booleans_spelled_as_strings_still_pass() -> None:
    # What ``!env`` gives: environment values are strings.
    config = await load_numeric({"count": "10", "ratio": "0.25", "flag": "true", "either": "7"})
    assert isinstance(config, Numeric)
    assert (config.count, config.ratio, config.flag, config.either) == (10, 0.25, True, 7)


def shell_deployment(directory: Path, config: str) -> Path:
    """The bash seam and one ``bash-local`` entry, ``shell`` (on line 2), its ``config:``
    (on line 4) followed by ``config``."""
    entries = entry_after("- {id: bash, name: bash}", "shell", "bash-local", config)
    return write_deployment(directory, entries)


def test_dsh_check_names_the_line_of_a_boolean_given_for_a_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = shell_deployment(tmp_path, "\n    kill_grace_ms: 10\n    default_timeout_ms: true")
    assert dsh_refused(capsys, "check", str(path)) == [
        f"deployment {path} has 1 problem:",
        f"invalid config for plugin \"bash-local\" ({path}:2: entry 'shell'):",
        f"  - {path}:6: Input should be a valid number, not a boolean (at default_timeout_ms)",
    ]


def test_dsh_check_takes_a_number_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shell_deployment(tmp_path, "{default_timeout_ms: !env DSH_TEST_TIMEOUT_MS}")
    monkeypatch.setenv("DSH_TEST_TIMEOUT_MS", "5000")
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (2 plugin entries active)\n"
