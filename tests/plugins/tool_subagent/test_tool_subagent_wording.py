"""What the model is told about a subagent tool: its description and its ``prompt``
parameter, derived from the provider's ``inherits_parent_context``, and
``run_in_background`` only when the config enables it."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_tool_subagent import describe_tool, parameters_for
from tests.plugins.tool_subagent.tool_subagent_support import (
    BACKGROUND,
    FOREGROUND,
    FORK,
    FORK_PROMPT,
    FORK_SEES,
    SPAWN,
    SPAWN_PROMPT,
    SPAWN_SEES,
    subagent_rig,
)

pytestmark = pytest.mark.anyio

DESCRIPTION = {
    "description": "A short label for the task (3 to 6 words).",
    "title": "Description",
    "type": "string",
}
RUN_IN_BACKGROUND = {
    "default": False,
    "description": "Return at once with the subagent's id instead of waiting; a notice "
    "arrives in a later turn when it finishes.",
    "title": "Run In Background",
    "type": "boolean",
}


def schema(prompt: str, *, background: bool, title: str, shown: bool = True) -> dict[str, Any]:
    """The schema of the arguments: as the model is shown it (``shown``: the registry
    adds that no other names are taken), else as the pydantic model has it."""
    properties: dict[str, Any] = {
        "description": DESCRIPTION,
        "prompt": {"description": prompt, "title": "Prompt", "type": "string"},
    }
    if background:
        properties["run_in_background"] = RUN_IN_BACKGROUND
    found: dict[str, Any] = {
        "properties": properties,
        "required": ["description", "prompt"],
        "title": title,
        "type": "object",
    }
    return found | {"additionalProperties": False} if shown else found


async def test_a_spawn_tool_says_the_child_sees_nothing_and_needs_a_standalone_prompt() -> None:
    async with subagent_rig() as rig:
        tool = await rig.schema("subagent")
    assert tool.description == SPAWN_SEES + BACKGROUND
    assert tool.parameters == schema(SPAWN_PROMPT, background=True, title="SpawnArgs")


async def test_a_fork_tool_says_the_child_has_the_completed_turns_only() -> None:
    async with subagent_rig([FORK]) as rig:
        tool = await rig.schema("subagent_fork")
    assert tool.description == FORK_SEES + BACKGROUND
    assert tool.parameters == schema(FORK_PROMPT, background=True, title="ForkArgs")


@pytest.mark.parametrize(
    ("config", "name", "sees", "prompt", "title"),
    [
        (SPAWN, "subagent", SPAWN_SEES, SPAWN_PROMPT, "SpawnArgs"),
        (FORK, "subagent_fork", FORK_SEES, FORK_PROMPT, "ForkArgs"),
    ],
)
async def test_without_background_runs_there_is_no_run_in_background(
    config: dict[str, Any], name: str, sees: str, prompt: str, title: str
) -> None:
    async with subagent_rig([config | {"enable_run_in_background": False}]) as rig:
        tool = await rig.schema(name)
    assert tool.description == sees + FOREGROUND
    assert tool.parameters == schema(prompt, background=False, title=title)
    assert "run_in_background" not in tool.parameters["properties"]


def test_the_wording_functions_are_the_published_strings() -> None:
    assert describe_tool(False, True) == SPAWN_SEES + BACKGROUND
    assert describe_tool(True, False) == FORK_SEES + FOREGROUND
    assert parameters_for(True, True).model_json_schema() == schema(
        FORK_PROMPT, background=True, title="ForkArgs", shown=False
    )
    assert parameters_for(False, False).model_json_schema() == schema(
        SPAWN_PROMPT, background=False, title="SpawnArgs", shown=False
    )
