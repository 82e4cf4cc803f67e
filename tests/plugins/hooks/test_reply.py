"""Reading a hook's answer: exit status, JSON output, plain output (Claude Code's rules)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_hooks._reply import Reply, read_reply
from dsh_hooks._runner import Outcome


def ok(data: Any) -> Outcome:
    return Outcome(0, json.dumps(data))


def test_exit_0_without_output_says_nothing() -> None:
    assert read_reply("h", Outcome(0), plain_context=True) == Reply()


def test_plain_stdout_is_context_only_where_the_event_takes_it() -> None:
    assert read_reply("h", Outcome(0, " note \n"), plain_context=True) == Reply(context="note")
    assert read_reply("h", Outcome(0, "note"), plain_context=False) == Reply()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"text"'])
def test_stdout_that_is_not_a_json_object_is_plain(text: str) -> None:
    assert read_reply("h", Outcome(0, text), plain_context=True) == Reply(context=text)


def test_exit_2_blocks_with_stderr_as_the_reason() -> None:
    reply = read_reply("h", Outcome(2, '{"decision": "approve"}', " no rm \n"), plain_context=True)
    assert reply == Reply(block="no rm")


def test_exit_2_without_stderr_names_the_hook() -> None:
    reply = read_reply("guard.sh", Outcome(2), plain_context=False)
    assert reply == Reply(block="hook 'guard.sh' exited with status 2")


def test_another_exit_is_a_warning_with_what_the_hook_said() -> None:
    assert read_reply("h", Outcome(1, "out", "bad\n"), plain_context=False) == Reply(
        warning="hook 'h' failed with exit status 1: bad"
    )
    assert read_reply("h", Outcome(3, "out\n"), plain_context=False) == Reply(
        warning="hook 'h' failed with exit status 3: out"
    )
    assert read_reply("h", Outcome(-11), plain_context=False) == Reply(
        warning="hook 'h' failed with exit status -11"
    )


def test_a_failure_is_a_warning() -> None:
    reply = read_reply("h", Outcome(None, failure="timed out after 1 s"), plain_context=False)
    assert reply == Reply(warning="hook 'h' timed out after 1 s")


@pytest.mark.parametrize("decision", ["allow", "deny", "ask"])
def test_permission_decisions_are_read(decision: str) -> None:
    out = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": "because",
            "updatedInput": {"command": "ls"},
            "additionalContext": " more ",
        }
    }
    assert read_reply("h", ok(out), plain_context=False) == Reply(
        permission=decision,
        permission_reason="because",
        updated_input={"command": "ls"},
        context="more",
    )


def test_an_unknown_permission_decision_and_malformed_fields_are_ignored() -> None:
    out = {
        "hookSpecificOutput": {
            "permissionDecision": "maybe",
            "permissionDecisionReason": 3,
            "updatedInput": "ls",
        }
    }
    assert read_reply("h", ok(out), plain_context=False) == Reply()
    assert read_reply("h", ok({"hookSpecificOutput": "x"}), plain_context=True) == Reply()


def test_decision_block_blocks_with_its_reason() -> None:
    assert read_reply("h", ok({"decision": "block", "reason": "r"}), plain_context=False) == Reply(
        block="r"
    )
    assert read_reply("h", ok({"decision": "block"}), plain_context=False) == Reply(
        block="blocked by a hook"
    )


def test_the_older_approve_decision_allows() -> None:
    reply = read_reply("h", ok({"decision": "approve", "reason": "fine"}), plain_context=False)
    assert reply == Reply(permission="allow", permission_reason="fine")


def test_continue_false_stops_with_its_reason() -> None:
    out = {"continue": False, "stopReason": "enough", "systemMessage": "heads up"}
    assert read_reply("h", ok(out), plain_context=False) == Reply(stop="enough", warning="heads up")
    assert read_reply("h", ok({"continue": False}), plain_context=False) == Reply(stop="")
    assert read_reply("h", ok({"continue": True}), plain_context=False) == Reply()
