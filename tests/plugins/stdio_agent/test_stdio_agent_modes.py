"""The stdio-agent front-end's options for scripts: another model for the run, the
turn's events as JSON lines, the session id at the end, and a reader that goes away."""

from __future__ import annotations

import io
import json

import pytest

from dsh.testing import Reply, text, tool_call, tool_calls
from dsh_llm import Finish, LlmFailure
from dsh_stdio_agent import EXIT_FAILED, EXIT_OK, StdioAgentError
from tests.plugins.stdio_agent.stdio_support import front_rig

pytestmark = pytest.mark.anyio


async def test_a_run_can_switch_the_agent_to_another_model() -> None:
    async with front_rig(text("from other")) as r:
        r.model.install(r.root, ["other"])
        assert await r.front.run(prompt="hi", model="other") == EXIT_OK
        assert r.out.getvalue() == "from other\n"
        assert [request.model for request in r.model.requests] == ["other"]
        assert r.agent.model == "other"
        assert r.agent.session.header.meta["model"] == "other"  # a new session records it


async def test_json_output_prints_each_event_of_the_turn() -> None:
    replies: list[Reply] = [tool_calls(tool_call("echo", '{"text": "hi"}')), text("said hi")]
    async with front_rig(*replies) as r:
        assert await r.front.run(prompt="echo hi", output="json") == EXIT_OK
        lines = r.out.getvalue().splitlines()
        records = [json.loads(line) for line in lines]
        events = r.agent.session.events
        assert records == [json.loads(json.dumps(event.to_json())) for event in events]
        assert records[0]["type"] == "turn/start"
        assert records[-1] == {
            "seq": len(events) - 1,
            "type": "turn/end",
            "time": events[-1].time,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        }
        assert all(line.startswith('{"seq": ') for line in lines)  # and no bare text
        assert r.err.getvalue() == '[tool] echo {"text": "hi"}\n[tool] echo -> hi\n'


async def test_json_output_of_piped_lines_and_its_refusals() -> None:
    async with front_rig(text("one"), text("two")) as r:
        r.lines.feed("a", "b")
        r.lines.close()
        assert await r.front.run(output="json") == EXIT_OK
        records = [json.loads(line) for line in r.out.getvalue().splitlines()]
        assert [rec["data"]["turn"] for rec in records if rec["type"] == "turn/end"] == [1, 2]
    async with front_rig(interactive=True) as r:
        assert await r.front.run(output="json") == EXIT_FAILED
        assert r.err.getvalue() == (
            "JSON output needs a one-shot run (-p) or input that is not a terminal\n"
        )
        with pytest.raises(StdioAgentError, match='unknown output "xml"; choose one of: text, js'):
            await r.front.run(prompt="hi", output="xml")


async def test_show_session_names_the_session_at_the_end() -> None:
    async with front_rig(text("hello"), text("again")) as r:
        assert await r.front.run(prompt="hi", show_session=True) == EXIT_OK
        assert r.err.getvalue() == f"session: {r.agent.session.id}\n"
        # A piped REPL names it too; a terminal REPL does not.
        r.err.seek(0)
        r.err.truncate()
        r.lines.feed("more")
        r.lines.close()
        assert await r.front.run(show_session=True) == EXIT_OK
        assert r.err.getvalue() == f"session: {r.agent.session.id}\n"
    async with front_rig(text("hello"), interactive=True) as r:
        r.lines.feed("hi", "/exit")
        assert await r.front.run(show_session=True) == EXIT_OK
        assert "session:" not in r.err.getvalue()
    async with front_rig() as r:
        r.lines.close()  # nothing was said: no session worth naming
        assert await r.front.run(show_session=True) == EXIT_OK
        assert r.err.getvalue() == ""


async def test_a_piped_repl_that_ends_with_exit_keeps_the_failure() -> None:
    failed = [Finish("error", LlmFailure(message="down", code="DOWN"))]
    async with front_rig(failed) as r:
        r.lines.feed("hi", "/exit")
        assert await r.front.run() == EXIT_FAILED


class ClosedPipe(io.StringIO):
    """stdout whose reader goes away after ``good`` writes."""

    def __init__(self, good: int) -> None:
        super().__init__()
        self.good = good

    def write(self, text: str) -> int:
        if self.good <= 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.good -= 1
        return super().write(text)


@pytest.mark.parametrize("good", [0, 1])
async def test_a_reader_that_goes_away_cancels_the_turn_and_raises(good: int) -> None:
    async with front_rig(text("first ", "second ", "third")) as r:
        r.front.stdout = ClosedPipe(good)
        with pytest.raises(BrokenPipeError):
            await r.front.run(prompt="hi")
        assert r.agent.session.turn_end(1) == {"kind": "aborted", "reason": "user"}
        assert r.front._chat is None  # the run is over


async def test_a_piped_repl_stops_reading_when_its_reader_goes_away() -> None:
    async with front_rig(text("answer")) as r:
        r.front.stdout = ClosedPipe(0)
        r.lines.feed("hi", "never read")
        with pytest.raises(BrokenPipeError):
            await r.front.run()
        assert r.lines.reads == 1
        assert r.agent.session.last_turn() == 1
