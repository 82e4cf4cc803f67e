"""bash-local's sandbox (issue 25, ARCHITECTURE §6.13): the config, the policy each
command is started with, the Launch applied to the process, the escalation flag, and
what the plugin provides while the sandbox is on (with a mechanism that records the
policies; the real one is tested in test_bash_local_sandbox_linux.py)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from dsh import ConfigError, Context, cli
from dsh.testing import write_deployment
from dsh_bash import Bash, BashRequest, BashSandbox
from dsh_bash_local import LocalBash, LocalBashConfig, default_writable_roots
from dsh_fs_local import DEFAULT_DENY_READ
from dsh_sandbox import Launch, Sandbox, SandboxPolicy, SandboxUnavailableError
from tests.plugins.bash.bash_support import run
from tests.plugins.bash_local.sandbox_support import SANDBOXED, Recording, sandboxed_shell
from tests.support import entry_after

pytestmark = pytest.mark.anyio

TEMP = os.path.realpath(tempfile.gettempdir())

# -- config ----------------------------------------------------------------------------------


def test_the_defaults_are_off_no_network_the_session_cwd_and_fs_locals_deny_list() -> None:
    config = LocalBashConfig()
    assert (config.sandbox, config.network) == ("off", False)
    assert config.writable_roots == default_writable_roots() == [".", tempfile.gettempdir()]
    assert config.deny_read == list(DEFAULT_DENY_READ)


def deployment(directory: Path, config: str, *, sandbox: bool = True) -> Path:
    seam = "- {id: sandbox, name: sandbox}\n" if sandbox else ""
    entries = entry_after("- {id: bash, name: bash}", "local", "bash-local", f"\n    {config}")
    return write_deployment(directory, entries + seam)


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (
            "sandbox: full-access",
            "Input should be 'off', 'read-only' or 'workspace-write' (at sandbox)",
        ),
        (
            "network: maybe",
            "Input should be a valid boolean, unable to interpret input (at network)",
        ),
        (
            "deny_read: ['.env']",
            "deny_read pattern '.env' must be absolute or start with ~ (at deny_read.0)",
        ),
        (
            "writable_roots: ['  ']",
            "a writable root must name a directory, got an empty string (at writable_roots.0)",
        ),
    ],
)
def test_a_bad_sandbox_setting_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, problem: str
) -> None:
    path = deployment(tmp_path, config)
    assert cli.main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:5:" in err, err
    assert problem in err


def test_a_sandbox_without_the_sandbox_service_fails_the_check_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = deployment(tmp_path, "sandbox: read-only", sandbox=False)
    assert cli.main(["check", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"deployment {path} has 1 problem:\n"
        f'{path}:5: bash-local sandbox "read-only" needs the sandbox service: load the '
        "sandbox plugin and a mechanism (sandbox-linux), or set sandbox: off\n"
    )


async def test_a_sandbox_without_the_service_in_code_fails_the_plugin_unlocated() -> None:
    async with Context() as root:
        await root.plugin(Bash)
        fiber = root.plugin(LocalBash, {"sandbox": "workspace-write"})
        await fiber.settled()
        assert isinstance(fiber.error, ConfigError)
        assert str(fiber.error).startswith('bash-local sandbox "workspace-write" needs the')
        assert root.bash.executor is None
        assert root.get("bash_sandbox") is None
        # The service coming restarts it; the sandbox is then on.
        await root.plugin(Sandbox)
        await fiber.settled()
        assert fiber.state.name == "ACTIVE"
        assert root.get("bash_sandbox") is not None


# -- the policy and the launch ---------------------------------------------------------------


async def test_a_command_runs_through_the_launch_of_its_policy(tmp_path: Path) -> None:
    async with sandboxed_shell() as (root, mechanism):
        done = await run(root, f"echo ${SANDBOXED}; pwd", cwd=str(tmp_path))
    assert done.stdout.text == f"1\n{tmp_path}\n"
    assert mechanism.policies == [
        SandboxPolicy(
            mode="workspace-write",
            writable_roots=(str(tmp_path), TEMP),
            network=False,
            deny_read=DEFAULT_DENY_READ,
            cwd=str(tmp_path),
        )
    ]


async def test_the_roots_are_taken_from_the_session_cwd_canonical_and_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, sub, link = tmp_path / "session", tmp_path / "session" / "sub", tmp_path / "link"
    sub.mkdir(parents=True)
    link.symlink_to(session)
    monkeypatch.setenv("HOME", str(tmp_path))
    roots = [".", "sub", "~/session", "/", TEMP, "/"]
    async with sandboxed_shell(writable_roots=roots, network=True, deny_read=["~/k"]) as (
        root,
        mechanism,
    ):
        await run(root, "true", cwd=str(sub), session_cwd=str(link))
        await run(root, "true", cwd=str(sub))  # no session: from the command's directory
        monkeypatch.chdir(session)
        await run(root, "true")  # neither: from the process's
    first, second, third = mechanism.policies
    assert first.writable_roots == (str(session), str(sub), "/", TEMP)
    assert (first.network, first.deny_read, first.cwd) == (True, ("~/k",), str(sub))
    assert second.writable_roots == (str(sub), str(sub / "sub"), str(session), "/", TEMP)
    assert third.writable_roots == (str(session), str(sub), "/", TEMP)
    assert third.cwd is None


async def test_a_relative_cwd_reaches_the_policy_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path)
    async with sandboxed_shell() as (root, mechanism):
        await run(root, "true", cwd="here")
    assert mechanism.policies[0].cwd == str(tmp_path / "here")


async def test_read_only_has_no_writable_roots() -> None:
    async with sandboxed_shell(sandbox="read-only") as (root, mechanism):
        await run(root, "true")
    (policy,) = mechanism.policies
    assert (policy.mode, policy.writable_roots) == ("read-only", ())


async def test_the_preexec_step_and_the_passed_descriptors_reach_the_child(
    tmp_path: Path,
) -> None:
    stepped = tmp_path / "stepped"
    read_end, write_end = os.pipe()

    def step() -> None:
        os.close(os.open(stepped, os.O_CREAT | os.O_WRONLY, 0o600))

    def launch(policy: SandboxPolicy) -> Launch:
        return Launch(mechanism="recording", preexec=step, pass_fds=(write_end,))

    try:
        async with sandboxed_shell(Recording(launch)) as (root, _):
            done = await run(root, f"echo through >&{write_end}; echo ok")
        os.close(write_end)
        write_end = -1
        assert os.read(read_end, 100) == b"through\n"
    finally:
        os.close(read_end)
        if write_end >= 0:  # pragma: no cover - only when an assert above failed
            os.close(write_end)
    assert done.stdout.text == "ok\n"
    assert stepped.exists()


async def test_an_unsandboxed_request_skips_the_sandbox() -> None:
    async with sandboxed_shell() as (root, mechanism):
        done = await run(root, f"echo ${SANDBOXED}-", unsandboxed=True)
    assert done.stdout.text == "-\n"
    assert mechanism.policies == []


async def test_an_unavailable_sandbox_is_the_calls_error_and_starts_nothing(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    mechanism = Recording(fail="bubblewrap: not found; landlock: not supported")
    async with sandboxed_shell(mechanism) as (root, _):
        with pytest.raises(SandboxUnavailableError, match="bubblewrap: not found") as caught:
            await root.bash.run(BashRequest(f"touch {marker}"))
    assert caught.value.code == "SANDBOX_UNAVAILABLE"
    assert not marker.exists()


async def test_with_the_sandbox_off_the_service_is_not_used() -> None:
    mechanism = Recording()
    async with Context() as root:
        await root.plugin(Sandbox)
        root.sandbox.set_mechanism(mechanism)
        await root.plugin(Bash)
        await root.plugin(LocalBash)
        done = await run(root, f"echo ${SANDBOXED}-")
        assert root.bash.executor.confinement is None
        assert root.get("bash_sandbox") is None
    assert (done.stdout.text, mechanism.policies) == ("-\n", [])


# -- what it provides, and disposal ----------------------------------------------------------


async def test_bash_sandbox_is_provided_while_on_and_withdrawn_on_unload() -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        await root.plugin(Bash)
        fiber = await root.plugin(
            LocalBash, {"sandbox": "workspace-write", "writable_roots": ["."], "deny_read": []}
        )
        assert root.bash_sandbox == BashSandbox(
            mode="workspace-write", writable_roots=(".",), network=False, deny_read=()
        )
        await fiber.dispose()
        assert root.get("bash_sandbox") is None
        assert root.bash.executor is None


async def test_the_sandbox_service_going_away_fails_the_plugin_until_it_is_back() -> None:
    async with Context() as root:
        sandbox = await root.plugin(Sandbox)
        await root.plugin(Bash)
        fiber = await root.plugin(LocalBash, {"sandbox": "read-only"})
        await sandbox.dispose()
        await fiber.settled()
        assert isinstance(fiber.error, ConfigError)
        assert root.get("bash_sandbox") is None
        assert root.bash.executor is None
