"""``/undo`` and ``/rewind``, registered in the slash-command registry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_slash_commands import SlashCommand, SlashInvocation

from ._errors import CheckpointConflictError, CheckpointError

if TYPE_CHECKING:
    from ._service import Checkpoints, Restored

__all__ = ["describe_restore", "slash_commands"]


def describe_restore(done: Restored) -> str:
    """One line of what an undo or rewind restored."""
    what = (
        f"turn {done.turn}'s changes"
        if done.reverts is None
        else f"the undo of turn {done.turn} (restore {done.reverts})"
    )
    files = ", ".join(done.restored) or "no file needed it"
    lines = [f"restored {what}: {files}"]
    if done.overwritten:
        lines.append(f"overwritten although changed since: {', '.join(done.overwritten)}")
    if done.left:
        lines.append(f"left alone (not a regular file now): {', '.join(done.left)}")
    return "\n".join(lines)


def _flags(arguments: str) -> tuple[bool, list[str]]:
    words = arguments.split()
    return "--force" in words, [w for w in words if w != "--force"]


def slash_commands(service: Checkpoints) -> list[SlashCommand]:
    """The commands of ``service``."""

    async def undo(use: SlashInvocation) -> None:
        force, rest = _flags(use.arguments)
        if rest:
            use.reply(f"/undo takes no arguments but --force (got {' '.join(rest)!r})")
            return
        try:
            done = await service.undo(use.agent, force=force)
        except CheckpointConflictError as exc:
            use.reply(f"{exc}\nchanged since: {', '.join(exc.paths)}\n(/undo --force overwrites)")
            return
        use.reply(describe_restore(done))

    async def rewind(use: SlashInvocation) -> None:
        force, rest = _flags(use.arguments)
        if not rest:
            listed = service.turns(use.agent)
            lines = [
                f"{t.turn}: {t.title or '(no text)'}"
                + (f"  [{len(t.files)} file(s)]" if t.files else "")
                for t in listed
            ]
            use.reply("\n".join(lines) if lines else "no turns yet")
            return
        if len(rest) != 1 or not rest[0].isdigit():
            raise CheckpointError(f"/rewind takes a turn number (got {' '.join(rest)!r})")
        done = await service.rewind(use.agent, int(rest[0]), force=force)
        if use.switch is not None and done.agent is not None:
            use.switch(done.agent)
        use.reply(
            f"{describe_restore(done.restore)}\nrewound to before turn {rest[0]}: "
            f"continuing in session {done.session.id}"
        )

    return [
        SlashCommand(
            "undo",
            "take back the files the last turn changed (or the last undo)",
            "[--force]",
            undo,
        ),
        SlashCommand(
            "rewind",
            "list the turns, or restore the files and the conversation to before turn N",
            "[N] [--force]",
            rewind,
        ),
    ]
