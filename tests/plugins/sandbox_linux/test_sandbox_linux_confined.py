"""Real commands confined by ``sandbox-linux``, with each mechanism: what they cannot
write, read, connect to or resolve, checked from inside the command (ARCHITECTURE
§6.13)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from dsh_sandbox import SandboxPolicy
from tests.plugins.sandbox_linux.sandbox_support import MECHANISMS, confined, linux_only, require

pytestmark = [pytest.mark.anyio, linux_only]


@pytest.fixture(params=MECHANISMS)
def mechanism(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require(name)
    return name


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A writable root, beside a folder outside it (``outside``) holding a file."""
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "file").write_text("kept\n")
    (root / "escape").symlink_to(tmp_path / "outside")
    return root


def attempts(target: Path) -> str:
    """A script trying each kind of write at ``target`` (a folder), printing
    ``<kind>:<ok|refused>`` for each."""
    t = str(target)
    tries = {
        "create": f"echo x > {t}/new",
        "append": f"echo x >> {t}/file",
        "truncate": f": > {t}/file",
        "rename": f"mv {t}/file {t}/moved",
        "mkdir": f"mkdir {t}/dir",
        "unlink": f"rm {t}/file",
        "symlink": f"ln -s /etc {t}/link",
    }
    return "".join(
        f"if {command} 2>/dev/null; then echo {kind}:ok; else echo {kind}:refused; fi\n"
        for kind, command in tries.items()
    )


def refused_all(output: str) -> bool:
    return "ok" not in output.replace("refused", "") and output.count(":refused") == 7


async def test_workspace_write_allows_the_roots_and_refuses_writes_outside(
    mechanism: str, workspace: Path
) -> None:
    (workspace / "file").write_text("mine\n")
    policy = SandboxPolicy("workspace-write", writable_roots=(str(workspace),), cwd=str(workspace))
    _, output = await confined(mechanism, policy, attempts(workspace))
    assert output.count(":ok") == 6, output
    assert "unlink:refused" in output  # the file was renamed before
    assert sorted(os.listdir(workspace)) == ["dir", "escape", "link", "moved", "new"]
    outside = workspace.parent / "outside"
    for target in (outside, workspace / "escape", workspace / ".." / "outside"):
        _, output = await confined(mechanism, policy, attempts(target))
        assert refused_all(output), (target, output)
    assert sorted(os.listdir(outside)) == ["file"]
    assert (outside / "file").read_text() == "kept\n"


async def test_read_only_refuses_every_write_but_dev_null(mechanism: str, workspace: Path) -> None:
    (workspace / "file").write_text("mine\n")
    policy = SandboxPolicy("read-only", writable_roots=(str(workspace),), cwd=str(workspace))
    script = attempts(workspace) + "echo gone > /dev/null && echo devnull:ok\ncat file\n"
    _, output = await confined(mechanism, policy, script)
    assert refused_all(output.replace("devnull:ok", "")), output
    assert output.endswith("devnull:ok\nmine\n"), output
    assert sorted(os.listdir(workspace)) == ["escape", "file"]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback TCP server socket; a test checks nothing connected to it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    yield server
    server.close()


def accepted(server: socket.socket) -> bool:
    try:
        connection, _ = server.accept()
    except BlockingIOError:
        return False
    connection.close()
    return True


async def test_without_network_no_tcp_connect_reaches_a_loopback_server(
    mechanism: str, tmp_path: Path, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    script = (
        f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5)'"
        " 2>&1 | tail -1\n"
        f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo bash-tcp:ok\n"
    )
    policy = SandboxPolicy("workspace-write", writable_roots=(str(tmp_path),))
    _, output = await confined(mechanism, policy, script)
    assert "Error" in output, output
    assert "bash-tcp:ok" not in output, output
    assert not accepted(listener)


async def test_with_network_the_same_connect_arrives(
    mechanism: str, tmp_path: Path, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    policy = SandboxPolicy("read-only", network=True)
    script = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo bash-tcp:ok"
    code, output = await confined(mechanism, policy, script)
    assert (code, output) == (0, "bash-tcp:ok\n")
    assert accepted(listener)


async def test_without_network_no_name_resolves(mechanism: str) -> None:
    script = (
        "getent hosts localhost || echo getent:failed\n"
        "python3 -c 'import socket; socket.getaddrinfo(\"localhost\", 80)' 2>&1 | tail -1\n"
    )
    # only "localhost" (the hosts file names it): no query for a name of the internet
    _, output = await confined(mechanism, SandboxPolicy("read-only"), script)
    lines = output.splitlines()
    assert lines[0] == "getent:failed", output
    assert all(line.startswith("socket.gaierror") for line in lines[1:]), output


async def test_deny_read_files_and_folders_cannot_be_read(mechanism: str, workspace: Path) -> None:
    (workspace / ".env").write_text("SECRET=1\n")
    (workspace / "keys").mkdir()
    (workspace / "keys" / "id").write_text("KEY\n")
    (workspace / "src").mkdir()
    (workspace / "src" / ".env").write_text("SECRET=2\n")
    (workspace / "src" / "main.py").write_text("print()\n")
    deny = (f"{workspace}/**/.env", f"{workspace}/keys/**")
    policy = SandboxPolicy(
        "workspace-write", writable_roots=(str(workspace),), deny_read=deny, cwd=str(workspace)
    )
    script = "cat .env src/.env keys/id 2>/dev/null; cat src/main.py; echo done\n"
    _, output = await confined(mechanism, policy, script)
    assert output == "print()\ndone\n", output


async def test_a_symlink_to_a_denied_file_reads_nothing(mechanism: str, workspace: Path) -> None:
    secret = workspace.parent / "outside" / "file"
    (workspace / "alias").symlink_to(secret)
    policy = SandboxPolicy("read-only", deny_read=(str(secret),), cwd=str(workspace))
    _, output = await confined(mechanism, policy, "cat alias escape/file 2>/dev/null; echo end")
    assert output == "end\n", output


async def test_the_command_runs_in_the_policy_cwd(mechanism: str, workspace: Path) -> None:
    code, output = await confined(mechanism, SandboxPolicy("read-only", cwd=str(workspace)), "pwd")
    assert (code, output) == (0, f"{workspace}\n")


async def test_a_command_still_finishes_with_its_exit_code(mechanism: str) -> None:
    code, output = await confined(mechanism, SandboxPolicy("read-only"), "echo hi; exit 3")
    assert (code, output) == (3, "hi\n")
    await anyio.lowlevel.checkpoint()
