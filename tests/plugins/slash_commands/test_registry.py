"""The slash-command registry: registration, exact disposal, refusals, dispatch."""

from __future__ import annotations

from typing import Any

import pytest

from dsh import Context, DshError
from dsh_agent_core import AgentCore
from dsh_slash_commands import (
    DuplicateSlashCommandError,
    SlashCommand,
    SlashCommandError,
    SlashCommands,
    SlashInvocation,
    split_command,
)

pytestmark = pytest.mark.anyio


async def noop(invocation: SlashInvocation) -> None:
    return None


def command(name: str, run: Any = noop, **kw: Any) -> SlashCommand:
    return SlashCommand(name=name, description=f"the {name} command", run=run, **kw)


async def test_register_lists_and_disposes_exactly() -> None:
    async with Context() as root:
        await root.plugin(SlashCommands)
        registry = root.slash_commands
        changes: list[str] = []
        root.on("slash-commands/change", lambda: changes.append("x"))
        before = [c.name for c in registry.list()]
        plan = command("plan", argument_hint="[GOAL]")
        undo_plan = registry.register(plan)
        undo_a = registry.register(command("a"))
        assert [c.name for c in registry.list()] == [*before, "a", "plan"]
        assert registry.get("plan") is plan
        assert registry.get("nope") is None
        await undo_plan()
        assert [c.name for c in registry.list()] == [*before, "a"]
        await undo_plan()  # twice: nothing more
        await undo_a()
        assert [c.name for c in registry.list()] == before
        assert changes == ["x"] * 4


async def test_exact_disposer_is_adopted_by_a_composite() -> None:
    async with Context() as root:
        await root.plugin(SlashCommands)
        order: list[str] = []

        def wiring() -> Any:
            yield root.slash_commands.register(command("one"))
            yield lambda: order.append(str([c.name for c in root.slash_commands.list()]))

        undo = root.effect(wiring)
        await undo()
        # LIFO inside the composite: the command is still there when the later one runs.
        assert order == ["['one']"]
        assert root.slash_commands.list() == []


async def test_a_plugin_s_commands_go_with_it() -> None:
    async with Context() as root:
        await root.plugin(SlashCommands)

        def owner(ctx: Context, config: Any) -> Any:
            return ctx.slash_commands.register(command("mine"))

        owner.name = "owner"  # type: ignore[attr-defined]
        fiber = await root.plugin(owner)
        assert [c.name for c in root.slash_commands.list()] == ["mine"]
        await fiber.dispose()
        assert root.slash_commands.list() == []


async def test_duplicates_name_both_plugins() -> None:
    async with Context() as root:
        await root.plugin(SlashCommands)

        def first(ctx: Context, config: Any) -> Any:
            return ctx.slash_commands.register(command("undo"))

        def second(ctx: Context, config: Any) -> Any:
            return ctx.slash_commands.register(command("undo"))

        first.name = "checkpoints"  # type: ignore[attr-defined]
        second.name = "other-undo"  # type: ignore[attr-defined]
        await root.plugin(first)
        with pytest.raises(DuplicateSlashCommandError) as caught:
            await root.plugin(second)
        message = str(caught.value)
        assert '"/undo"' in message
        assert '"other-undo"' in message
        assert '"checkpoints"' in message
        assert caught.value.code == "SLASH_COMMAND"
        assert caught.value.holder is not None
        assert caught.value.holder.name == "checkpoints"
        assert [c.name for c in root.slash_commands.list()] == ["undo"]
        # The root registering a taken name: the claimant is the root fiber.
        with pytest.raises(
            DuplicateSlashCommandError, match=r"already registered by \"checkpoints\""
        ):
            root.slash_commands.register(command("undo"))


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("/plan", "without the /"),
        ("", "invalid"),
        ("two words", "invalid"),
        ("x" * 65, "invalid"),
        ("-dash", "invalid"),
        (3, "invalid"),
    ],
)
async def test_bad_names_are_refused(name: Any, what: str) -> None:
    async with Context() as root:
        await root.plugin(SlashCommands)
        with pytest.raises(SlashCommandError, match=what):
            root.slash_commands.register(command(name))
        assert root.slash_commands.list() == []


async def test_bad_shapes_are_refused() -> None:
    async with Context() as root:
        await root.plugin(SlashCommands)
        registry = root.slash_commands
        with pytest.raises(SlashCommandError, match="expects a SlashCommand, got str"):
            registry.register("plan")
        with pytest.raises(SlashCommandError, match="description must be a string, got int"):
            registry.register(SlashCommand(name="x", description=1, run=noop))  # type: ignore[arg-type]
        with pytest.raises(SlashCommandError, match="argument_hint must be a string"):
            registry.register(command("x", argument_hint=None))
        with pytest.raises(SlashCommandError, match="run must be an async function"):
            registry.register(command("x", run="no"))
        with pytest.raises(SlashCommandError, match=r'"/x": run must be an async function'):
            registry.register(SlashCommand("x", "no run given"))
        assert registry.list() == []


async def test_the_fields_come_in_the_contracts_order() -> None:
    """``SlashCommand(name, description, argument_hint, run)`` (ARCHITECTURE §6.16)."""
    shout = SlashCommand("shout", "say it loud", "TEXT", noop)
    assert (shout.name, shout.description, shout.argument_hint, shout.run) == (
        "shout",
        "say it loud",
        "TEXT",
        noop,
    )
    async with Context() as root:
        await root.plugin(SlashCommands)
        dispose = root.slash_commands.register(shout)
        assert root.slash_commands.list() == [shout]
        dispose()
        assert root.slash_commands.list() == []


def test_split_command() -> None:
    assert split_command("/plan") == ("plan", "")
    assert split_command("/plan  fix the bug  ") == ("plan", "fix the bug")
    assert split_command("/fix\nline two") == ("fix", "line two")
    assert split_command("/ns:cmd a") == ("ns:cmd", "a")
    assert split_command("/tmp/x is a path") is None
    assert split_command("plan") is None
    assert split_command("/") is None
    assert split_command("/ leading") is None


async def test_dispatch_builds_the_invocation_and_reports_failures() -> None:
    async with Context() as root:
        await root.plugin(SlashCommands)
        seen: list[SlashInvocation] = []
        replies: list[str] = []

        async def record(invocation: SlashInvocation) -> None:
            seen.append(invocation)
            invocation.reply("done")

        async def refuses(invocation: SlashInvocation) -> None:
            raise DshError("not now")

        async def breaks(invocation: SlashInvocation) -> None:
            raise KeyError("k")

        registry = root.slash_commands
        registry.register(command("rec", record))
        registry.register(command("refuses", refuses))
        registry.register(command("breaks", breaks))

        async def send(text: str) -> None:
            return None

        def use(**kw: Any) -> Any:
            return registry.dispatch(
                kw.pop("text"), agent="A", reply=replies.append, send=send, frontend="test"
            )

        assert await use(text="/rec  some  args ") is True
        (invocation,) = seen
        assert invocation.arguments == "some  args"
        assert invocation.agent == "A"
        assert invocation.frontend == "test"
        assert invocation.command.name == "rec"
        assert invocation.switch is None
        assert await use(text="/refuses") is True
        assert await use(text="/breaks") is True
        assert replies == ["done", "/refuses: not now\n", "/breaks failed: KeyError: 'k'\n"]
        assert await use(text="/unknown") is False
        assert await use(text="not a command") is False


async def test_agent_core_starts_the_registry() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        assert isinstance(root.get("slash_commands"), SlashCommands)
