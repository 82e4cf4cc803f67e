"""``dsh run FILE -p PROMPT`` imports what the run needs and nothing more (issue 31):
no terminal chat, no HTTP client, no front-end or plugin the deployment does not
name, and no ``importlib.metadata`` scan, dsh's or pydantic's (RFC 0055). Pinned by
what a fresh process has in ``sys.modules`` afterwards, not by time."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ECHO

#: Modules a one-shot run of the echo example must leave alone.
HEAVY = {
    # The terminal chat (a run with -p prints the answer and exits).
    "prompt_toolkit",
    "rich",
    "dsh_stdio_agent._terminal",
    "dsh_stdio_agent._view",
    # HTTP clients: the example's model is a local file.
    "httpx",
    "httpcore",
    "dsh_llm_openai",
    "dsh_llm_anthropic",
    # Other front-ends and plugins the deployment does not name.
    "acp",
    "dsh_acp",
    "mcp",
    "dsh_mcp",
    "dsh_hot_reload",
    "watchfiles",
    "dsh_web_fetch",
    "dsh_otel",
    "opentelemetry",
    "ray",
    # Needed only for an error's message, or a terminal's approval question (RFC 0050).
    "difflib",
    "termios",
    # Needed only to read stdin, or by a session store and a listing (RFC 0055).
    "anyio.from_thread",
    "dsh_session._describe",
    "dsh_session._paths",
    "dsh_session._store_plugin",
}

PROBE = """
import importlib.metadata, json, sys

groups = []
read = importlib.metadata.entry_points

def spy(**params):
    groups.append(params.get("group"))
    return read(**params)

importlib.metadata.entry_points = spy
import dsh.cli

status = dsh.cli.main(["run", sys.argv[1], "-p", "echo hello"])
print(json.dumps({"status": status, "modules": sorted(sys.modules), "groups": groups}))
"""


def one_shot() -> tuple[int, set[str], list[str | None]]:
    """The exit status, the modules imported and the entry-point groups asked of
    ``importlib.metadata`` in one fresh ``dsh run`` of the echo example."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ECHO)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    *answer, report = done.stdout.splitlines()
    assert answer == ["The echo tool returned: hello"], done.stdout
    result = json.loads(report)
    return result["status"], set(result["modules"]), result["groups"]


def test_a_one_shot_run_imports_no_terminal_chat_http_client_or_unused_plugin() -> None:
    status, modules, groups = one_shot()
    assert status == 0
    assert {"dsh_agent_core", "dsh_stdio_agent._chat"} <= modules  # what the run needs
    assert modules.isdisjoint(HEAVY), sorted(modules & HEAVY)
    # dsh finds its commands and plugins, and pydantic's (none installed here), without
    # importlib.metadata's scan of every installed distribution (RFC 0055).
    assert groups == []
