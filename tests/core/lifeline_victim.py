"""A dsh runtime to be killed: ``python -m tests.core.lifeline_victim BACKEND WHAT MARK
READY``.

It loads bash-local (and jobs, or mcp) and starts, with ``LIFELINE_TEST_MARK=MARK`` in
the environment, one of: ``bash`` (a foreground command that starts two grandchildren),
``job`` (the same as a background job), ``setsid`` (a command whose grandchild leaves
its group with ``setsid``), ``mcp`` (a stdio MCP server that starts a child); ``exit``
starts a job and then exits normally. A line is written to the named pipe READY once
everything runs (in ``exit``, by the runtime, once the job said so on a pipe of its own).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from dsh import Context
from dsh_bash import Bash, BashRequest
from dsh_bash_local import LocalBash
from dsh_jobs import Jobs
from dsh_mcp import Mcp
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tools
from tests.core.lifeline_support import await_line, ready_pipe

SERVER = Path(__file__).parents[1] / "plugins" / "mcp" / "servers" / "echo_server.py"
GRANDCHILDREN = "sleep 1000 & sleep 1000 & echo ready > {ready}; wait"
ESCAPED = "setsid sleep 1000 & sleep 1000 & echo ready > {ready}; wait"


async def main(what: str, mark: str, ready: Path) -> None:
    env = {"LIFELINE_TEST_MARK": mark}
    async with Context() as root:
        await root.plugin(Bash)
        await root.plugin(LocalBash)
        if what in ("bash", "setsid"):
            command = (GRANDCHILDREN if what == "bash" else ESCAPED).format(ready=ready)
            await root.bash.run(BashRequest(command, env=env, timeout_ms=0))
        elif what in ("job", "exit"):
            await root.plugin(Jobs)
            job_ready = ready if what == "job" else ready_pipe(ready.parent)
            await root.jobs.start(BashRequest(GRANDCHILDREN.format(ready=job_ready), env=env))
            if what == "exit":
                assert await anyio.to_thread.run_sync(await_line, job_ready)
                await anyio.to_thread.run_sync(ready.write_text, "ready\n")
                return  # the runtime ends here, normally, with the job running
        else:
            await root.plugin(SystemPrompt)
            await root.plugin(Tools)
            server = {"command": sys.executable, "args": [str(SERVER), "--child"], "env": env}
            await root.plugin(Mcp, {"servers": {"echo": server}})
            await anyio.to_thread.run_sync(ready.write_text, "up\n")
        await anyio.sleep_forever()


if __name__ == "__main__":
    backend, what, mark, ready = sys.argv[1:]
    anyio.run(main, what, mark, Path(ready), backend=backend)
