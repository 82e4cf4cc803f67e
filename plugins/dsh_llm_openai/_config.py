"""The ``llm-openai`` config: where the server is, which models it serves, how patient to be."""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag

from dsh_llm.http import HttpModelConfig

__all__ = [
    "DEFAULT_BASE_URL",
    "FunctionChoice",
    "OpenAICompatibleConfig",
    "StepToolChoice",
    "ToolChoice",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_WORDS = ("auto", "none", "required")


class _Function(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)


class FunctionChoice(BaseModel):
    """``{type: function, function: {name}}``: the model must call that tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["function"]
    function: _Function


def _shorthand(value: object) -> object:
    """A tool's name for the named form; ``""`` (an unset ``!env [NAME, ""]``) for unset."""
    if value == "":
        return None
    if isinstance(value, str) and value not in _WORDS:
        return {"type": "function", "function": {"name": value}}
    return value


#: One step's ``tool_choice``: a word of the API, a :class:`FunctionChoice`, or a tool's
#: name (short for the function form); None leaves the server's default.
ToolChoice: TypeAlias = Annotated[
    Literal["auto", "none", "required"] | FunctionChoice | None, BeforeValidator(_shorthand)
]


class StepToolChoice(BaseModel):
    """``tool_choice`` by step: ``first_step`` for a turn's first model request,
    ``then`` for the others (None: not sent on those steps)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    first_step: ToolChoice = None
    then: ToolChoice = None

    def for_step(self, step: int | None) -> str | FunctionChoice | None:
        """The choice of step ``step`` (None, a request outside a turn: the first)."""
        return self.first_step if step is None or step <= 1 else self.then


def _form(value: object) -> str:
    """Which form of ``tool_choice`` ``value`` is: a mapping with a step key is the
    per-step one."""
    steps = isinstance(value, dict) and bool({"first_step", "then"} & value.keys())
    return "steps" if steps or isinstance(value, StepToolChoice) else "one"


class OpenAICompatibleConfig(HttpModelConfig):
    """Config of the ``llm-openai`` plugin (unknown keys are errors).

    ``api_key`` is sent as ``Authorization: Bearer <api_key>``; requests go to
    ``<base_url>/chat/completions``. The keys every HTTP adapter shares are
    ``dsh_llm.http.HttpModelConfig``'s.
    """

    base_url: str = DEFAULT_BASE_URL
    #: Send reasoning back as ``reasoning_content`` on assistant messages (DeepSeek
    #: thinking mode requires it once a tool was called; most servers reject or ignore it).
    send_reasoning: bool = False
    #: Sent only when set (servers differ in what they accept).
    seed: int | None = None
    #: Sent only with tools: one choice for every step, or one per step.
    tool_choice: Annotated[
        Annotated[ToolChoice, Tag("one")] | Annotated[StepToolChoice, Tag("steps")],
        Discriminator(_form),
    ] = None
    #: Ask the server for a context window the config does not give (once per model).
    probe_context_window: bool = True

    def step_tool_choice(self, step: int | None) -> str | FunctionChoice | None:
        """The ``tool_choice`` of step ``step`` of a turn (1 is the first)."""
        choice = self.tool_choice
        return choice.for_step(step) if isinstance(choice, StepToolChoice) else choice

    def request_options(
        self, with_tools: bool, step: int | None = None, offered: Collection[str] | None = None
    ) -> dict[str, Any]:
        """The optional body fields this config sets for a request (``with_tools``:
        the request offers tools; ``step``: its step in the turn, for ``tool_choice``;
        ``offered``: the names of its tools, when known: a choice that forces another
        tool is left out). llama-cpp-python's server reads a missing ``tool_choice``
        as "none": force a tool by its name on the first step there."""
        options = self.sampling()
        if self.seed is not None:
            options["seed"] = self.seed
        if with_tools:
            choice = self.step_tool_choice(step)
            if isinstance(choice, FunctionChoice):
                if offered is None or choice.function.name in offered:
                    options["tool_choice"] = choice.model_dump()
            elif choice is not None:
                options["tool_choice"] = choice
            if self.parallel_tool_calls is not None:
                options["parallel_tool_calls"] = self.parallel_tool_calls
        return options
