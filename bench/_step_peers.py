"""The peers of :mod:`bench.agent_step`: a raw asyncio floor, pydantic-ai and
openai-agents, each following :data:`bench._step_script.SCRIPT`."""

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from agents import Agent as OaiAgent
from agents import ModelResponse as OaiModelResponse
from agents import ModelSettings, RunConfig, Runner, function_tool, set_tracing_disabled
from agents import Usage as OaiUsage
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ToolCallOutputItem, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model as OaiModel
from agents.models.interface import ModelTracing
from agents.result import RunResult
from agents.tool import Tool as OaiTool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam
from pydantic_ai import Agent as PaiAgent
from pydantic_ai import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai import ToolReturnPart as PaiToolReturnPart
from pydantic_ai.agent import AgentRunResult
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits
from typing_extensions import override

from bench._step_script import (
    ECHO_ARGS,
    ECHO_DESCRIPTION,
    ECHO_JSON,
    FINAL,
    INSTRUCTIONS,
    PROMPT,
    SCRIPT,
    Outcome,
)

# -- floor --------------------------------------------------------------------------------

FloorItem = tuple[str, object]


async def _floor_model(messages: list[FloorItem]) -> tuple[str, str, dict[str, str]] | str:
    call_id = SCRIPT.next_call()
    if call_id is None:
        return FINAL
    return call_id, "echo", ECHO_ARGS


async def _floor_echo(text: str) -> str:
    return text


FLOOR_TOOLS: dict[str, Callable[..., Awaitable[str]]] = {"echo": _floor_echo}


async def floor_run() -> list[FloorItem]:
    messages: list[FloorItem] = [("user", PROMPT)]
    while True:
        reply = await _floor_model(messages)
        messages.append(("assistant", reply))
        if isinstance(reply, str):
            return messages
        _, name, args = reply
        messages.append(("tool", await FLOOR_TOOLS[name](**args)))


def floor_outcome(result: object) -> Outcome:
    assert isinstance(result, list)
    results = [str(value) for role, value in result if role == "tool"]
    return Outcome(results, str(result[-1][1]))


# -- pydantic-ai --------------------------------------------------------------------------

PAI_USAGE = RequestUsage(input_tokens=1, output_tokens=1)


async def _pai_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    call_id = SCRIPT.next_call()
    if call_id is None:
        return ModelResponse(parts=[TextPart(FINAL)], usage=PAI_USAGE)
    return ModelResponse(
        parts=[ToolCallPart("echo", ECHO_JSON, tool_call_id=call_id)], usage=PAI_USAGE
    )


def make_pai() -> Callable[[], Awaitable[object]]:
    PaiAgent.instrument_all(False)
    agent: PaiAgent[None, str] = PaiAgent(FunctionModel(_pai_model), instructions=INSTRUCTIONS)
    agent.instrument = False

    async def echo(text: str) -> str:
        return text

    echo.__doc__ = ECHO_DESCRIPTION
    agent.tool_plain(echo)
    limits = UsageLimits(request_limit=None)

    async def run() -> AgentRunResult[str]:
        return await agent.run(PROMPT, usage_limits=limits)

    return run


def pai_outcome(result: object) -> Outcome:
    assert isinstance(result, AgentRunResult)
    results = [
        str(part.content)
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, PaiToolReturnPart)
    ]
    return Outcome(results, str(result.output))


# -- openai-agents ------------------------------------------------------------------------

OAI_USAGE = OaiUsage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)


class ScriptedOaiModel(OaiModel):
    """The smallest ``Model``: complete responses from the script, no streaming."""

    @override
    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[OaiTool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> OaiModelResponse:
        call_id = SCRIPT.next_call()
        item: ResponseFunctionToolCall | ResponseOutputMessage
        if call_id is None:
            text = ResponseOutputText(type="output_text", text=FINAL, annotations=[])
            item = ResponseOutputMessage(
                id="msg-final",
                type="message",
                role="assistant",
                status="completed",
                content=[text],
            )
        else:
            item = ResponseFunctionToolCall(
                type="function_call", call_id=call_id, name="echo", arguments=ECHO_JSON
            )
        return OaiModelResponse(output=[item], usage=OAI_USAGE, response_id=None)

    @override
    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[OaiTool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the benchmark only runs Runner.run")


def make_oai() -> Callable[[], Awaitable[object]]:
    set_tracing_disabled(True)

    async def echo(text: str) -> str:
        return text

    echo.__doc__ = ECHO_DESCRIPTION
    agent: OaiAgent[Any] = OaiAgent(
        name="bench",
        instructions=INSTRUCTIONS,
        model=ScriptedOaiModel(),
        tools=[function_tool(echo)],
    )
    config = RunConfig(tracing_disabled=True)

    async def run() -> RunResult:
        turns = SCRIPT.tool_steps + 2
        result: RunResult = await Runner.run(agent, PROMPT, max_turns=turns, run_config=config)
        return result

    return run


def oai_outcome(result: object) -> Outcome:
    assert isinstance(result, RunResult)
    results = [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    return Outcome(results, str(result.final_output))
