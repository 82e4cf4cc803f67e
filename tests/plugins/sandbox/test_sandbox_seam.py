"""The sandbox seam: one mechanism at a time, policies checked, launches checked, and
``dsh check`` naming what confines commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh import CheckReport, ConfigError, Context, Disposer, Plugin, cli
from dsh.testing import write_deployment
from dsh_sandbox import (
    Launch,
    Sandbox,
    SandboxError,
    SandboxMechanism,
    SandboxPolicy,
    SandboxUnavailableError,
)

pytestmark = pytest.mark.anyio

POLICY = SandboxPolicy("workspace-write", writable_roots=("/tmp",))


class FakeMechanism:
    """A mechanism that answers every policy with the same launch and keeps them."""

    name = "fake"

    def __init__(self, answer: object = None, unavailable: str | None = None) -> None:
        self.answer = Launch(mechanism="fake", argv_prefix=("env",)) if answer is None else answer
        self.unavailable = unavailable
        self.policies: list[SandboxPolicy] = []

    async def probe(self) -> str:
        if self.unavailable is not None:
            raise SandboxUnavailableError(self.unavailable)
        return "fake-kernel"

    async def wrap(self, policy: SandboxPolicy) -> Any:
        self.policies.append(policy)
        await self.probe()
        return self.answer


def test_launch_argv_puts_the_prefix_first_and_defaults_to_nothing() -> None:
    launch = Launch(mechanism="bubblewrap", argv_prefix=("bwrap", "--"))
    assert launch.argv(["bash", "-c", "true"]) == ["bwrap", "--", "bash", "-c", "true"]
    bare = Launch(mechanism="unconfined")
    assert bare.argv(("true",)) == ["true"]
    assert (bare.preexec, bare.pass_fds) == (None, ())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"mode": "full-access"}, "invalid sandbox mode 'full-access': expected one of"),
        (
            {"mode": "read-only", "writable_roots": ("rel",)},
            "invalid writable root 'rel': expected an absolute path",
        ),
        ({"mode": "read-only", "cwd": "."}, "invalid sandbox cwd '.': expected an absolute"),
    ],
)
def test_a_bad_policy_is_refused(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(SandboxError, match=message) as info:
        SandboxPolicy(**arguments)
    assert info.value.code == "SANDBOX"


async def test_wrap_and_probe_go_to_the_mechanism_that_is_set() -> None:
    mechanism = FakeMechanism()
    assert isinstance(mechanism, SandboxMechanism)
    async with Context() as root:
        await root.plugin(Sandbox)
        assert [root.sandbox.mechanism] == [None]
        stop = root.sandbox.set_mechanism(mechanism)
        assert root.sandbox.mechanism == "fake"
        assert await root.sandbox.probe() == "fake-kernel"
        assert await root.sandbox.wrap(POLICY) is mechanism.answer
        assert mechanism.policies == [POLICY]
        await stop()
        assert root.sandbox.mechanism is None
        for call in (root.sandbox.probe(), root.sandbox.wrap(POLICY)):
            with pytest.raises(SandboxUnavailableError, match="no sandbox mechanism is set"):
                await call


async def test_one_mechanism_at_a_time() -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        root.sandbox.set_mechanism(FakeMechanism())
        with pytest.raises(SandboxError, match=r"already set \(fake\); one at a time"):
            root.sandbox.set_mechanism(FakeMechanism())


@pytest.mark.parametrize(
    "mechanism", [object(), type("Nameless", (FakeMechanism,), {"name": None})()]
)
async def test_an_object_that_is_not_a_mechanism_is_refused(mechanism: Any) -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        with pytest.raises(SandboxError, match=r"needs a str name, an async probe\(\)"):
            root.sandbox.set_mechanism(mechanism)
        assert root.sandbox.mechanism is None


async def test_wrap_refuses_what_is_not_a_policy_and_an_answer_that_is_not_a_launch() -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        root.sandbox.set_mechanism(FakeMechanism(answer=["bwrap"]))
        with pytest.raises(SandboxError, match="expects a SandboxPolicy, got str"):
            await root.sandbox.wrap("read-only")
        with pytest.raises(SandboxError, match="answered wrap\\(\\) with list, not a Launch"):
            await root.sandbox.wrap(POLICY)


async def test_unavailable_is_what_the_mechanism_says() -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        root.sandbox.set_mechanism(FakeMechanism(unavailable="tried: x (missing)"))
        with pytest.raises(SandboxUnavailableError, match=r"tried: x \(missing\)") as info:
            await root.sandbox.wrap(POLICY)
        assert info.value.code == "SANDBOX_UNAVAILABLE"


async def test_the_mechanism_goes_with_the_plugin_that_set_it() -> None:
    class Mechanism(Plugin):
        inject = ("sandbox",)

        def setup(self) -> Disposer:
            stop: Disposer = self.ctx.sandbox.set_mechanism(FakeMechanism())
            return stop

    async with Context() as root:
        listeners = len(root.events.event("deployment/check").listeners())
        seam = await root.plugin(Sandbox)
        assert len(root.events.event("deployment/check").listeners()) == listeners + 1
        fiber = await root.plugin(Mechanism)
        assert root.sandbox.mechanism == "fake"
        await fiber.dispose()
        assert root.sandbox._mechanisms == []
        await seam.dispose()
        assert root.get("sandbox") is None
        assert len(root.events.event("deployment/check").listeners()) == listeners


async def test_the_seam_has_no_config() -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match=r"Extra inputs are not permitted \(at mode\)"):
            await root.plugin(Sandbox, {"mode": "read-only"})
        assert root.get("sandbox") is None


async def test_the_check_names_what_confines_commands(tmp_path: Path) -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        root.sandbox.set_mechanism(FakeMechanism())
        report = CheckReport(tmp_path / "dsh.yml")
        for listener in root.events.event("deployment/check").listeners():
            await listener.call((report,))
    assert (report.passed, report.problems) == (["sandbox: fake-kernel"], [])


def test_dsh_check_fails_without_a_mechanism(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_deployment(tmp_path, "- {id: sandbox, name: sandbox}\n")
    assert cli.main(["check", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"{path}: sandbox: no sandbox mechanism is set: load one (sandbox-linux) next to "
        "the sandbox plugin (SANDBOX_UNAVAILABLE)\n"
    )
