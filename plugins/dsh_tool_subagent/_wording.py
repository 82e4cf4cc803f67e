"""What the model is told about a subagent tool, derived from its provider."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, create_model

__all__ = ["describe_tool", "parameters_for"]


def describe_tool(inherits_parent_context: bool, background: bool) -> str:
    """The tool's description: what the child sees, and how its result comes back."""
    if inherits_parent_context:
        sees = (
            "Delegate a task to a subagent that inherits this conversation: it starts "
            "with every completed turn so far (not the current, in-flight turn). Good for "
            "follow-ups, reviews and alternatives that need the context you already have."
        )
    else:
        sees = (
            "Delegate a self-contained task to a separate agent with its own, empty "
            "context: it does not see this conversation, so give it everything it needs."
        )
    if background:
        returns = (
            " By default this waits for the subagent and returns its final message; with "
            "run_in_background it returns an id at once, and a notice arrives in a later "
            "turn when the subagent finishes (send_message gives it more work, "
            "list_agents shows its status)."
        )
    else:
        returns = " It waits for the subagent and returns its final message."
    return sees + returns


def parameters_for(inherits_parent_context: bool, background: bool) -> type[BaseModel]:
    """The pydantic model of the tool's arguments (its JSON Schema is what the model
    sees)."""
    prompt_help = (
        "What the subagent should do now. It already has this conversation's completed "
        "turns: state only what is new (the task, what to focus on, what to return)."
        if inherits_parent_context
        else "The complete, standalone task: the subagent does not see this conversation, "
        "so include every fact, path and constraint it needs, and what to return."
    )
    fields: dict[str, Any] = {
        "description": (str, Field(description="A short label for the task (3 to 6 words).")),
        "prompt": (str, Field(description=prompt_help)),
    }
    if background:
        fields["run_in_background"] = (
            bool,
            Field(
                default=False,
                description="Return at once with the subagent's id instead of waiting; a "
                "notice arrives in a later turn when it finishes.",
            ),
        )
    name = "ForkArgs" if inherits_parent_context else "SpawnArgs"
    model: type[BaseModel] = create_model(name, **fields)
    return model
