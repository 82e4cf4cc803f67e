"""The terminal chat's output, drawn with rich: the answer as Markdown while it streams,
one dim line per tool call, a spinner with the elapsed time, status and token lines.

Only :mod:`._terminal` imports this module, and only when an interactive chat starts:
rich is not imported by ``dsh run -p`` or by ``import dsh_stdio_agent``.

How a streamed answer is drawn: the text is cut into Markdown's top-level blocks
(paragraphs, lists, code fences, tables...). Every block but the last is complete, so it
is printed once, for good, above a small live region (``rich.live.Live``, transient);
the live region holds only the block still being written (re-rendered as it grows, its
tail when it is taller than the screen), the tool calls still running and the spinner.
The scrollback therefore holds each block once, rendered, and nothing has to be erased
but the live region.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from markdown_it import MarkdownIt
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment
from rich.text import Text

from ._report import compact
from ._usage import usage_text

if TYPE_CHECKING:
    from dsh_llm import Usage

__all__ = ["SPINNER", "View", "split_blocks", "token_line", "tool_line"]

#: The spinner's frames (rich's "dots") and the time each one shows, in seconds.
SPINNER = ("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏", 0.08)
#: The shortest time between two redraws of a streaming answer, in seconds.
REDRAW = 1 / 30


@functools.cache
def _parser() -> MarkdownIt:
    # The parser rich's Markdown uses, so the blocks are the ones it renders.
    return MarkdownIt().enable("strikethrough").enable("table")


def split_blocks(text: str) -> tuple[str, str]:
    """``(complete, rest)``: the Markdown top-level blocks of ``text`` before its last
    one, and the last one (which may still grow). ``complete`` is ``""`` while
    ``text`` holds a single block; ``complete + rest == text``."""
    starts = [
        token.map[0]
        for token in _parser().parse(text)
        if token.level == 0 and token.nesting >= 0 and token.map is not None
    ]
    if len(starts) < 2:
        return "", text
    lines = text.splitlines(keepends=True)
    cut = starts[-1]
    return "".join(lines[:cut]), "".join(lines[cut:])


def tool_line(result: Mapping[str, Any], arguments: str, limit: int) -> Text:
    """One finished tool call (``result`` is its ``tool/result`` event's data):
    ``▸ name args → first line of the result (+N lines)``, dim, or ``✗ name args
    failed (CODE): first line`` in dim red. Arguments and the line are folded to
    ``limit`` characters each."""
    call = _call_label(result["name"], arguments, limit)
    lines = result["content"].splitlines()
    first = next((line for line in lines if line.strip()), "")
    shown = compact(first, limit) if first else "(no output)"
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    if result["is_error"]:
        return Text(f"✗ {call} failed ({result.get('code')}): {shown}{more}", style="dim red")
    return Text(f"▸ {call} → {shown}{more}", style="dim")


def _call_label(name: str, arguments: str, limit: int) -> str:
    args = compact(arguments, limit)
    return name if args in ("", "{}") else f"{name} {args}"


def token_line(seconds: float, usage: Usage | None) -> Text:
    """The line after a turn: ``↳ 1.2s · 1,234 in · 56 out`` (then cached and
    reasoning tokens when the model reported them)."""
    parts = [f"↳ {seconds:.1f}s"]
    if usage is not None:
        parts.append(usage_text(usage))
    return Text(" · ".join(parts), style="dim")


def _blank(line: list[Segment]) -> bool:
    return all(
        not segment.text.strip() and (segment.style is None or segment.style.bgcolor is None)
        for segment in line
    )


def _trimmed(lines: list[list[Segment]]) -> list[list[Segment]]:
    """``lines`` without the blank lines rich puts before or after some blocks."""
    start, end = 0, len(lines)
    while start < end and _blank(lines[start]):
        start += 1
    while end > start and _blank(lines[end - 1]):
        end -= 1
    return lines[start:end]


class _Lines:
    """Rendered lines, printed as they are."""

    def __init__(self, lines: Iterable[list[Segment]]) -> None:
        self.lines = list(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield from line
            yield Segment.line()


@dataclass
class _Running:
    """A tool call that has not returned yet."""

    label: str
    since: float


class _Region:
    """The live region: the block being written, the running tool calls, the spinner;
    only its last lines when it is taller than the screen."""

    def __init__(self, view: View) -> None:
        self.view = view

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(Group(*self.view.region()), options, pad=False)
        room = max(1, console.size.height - 1)
        yield _Lines(lines[-room:])


class View:
    """What the terminal chat shows; every method is called from the event loop's
    thread except :meth:`log` and :meth:`status`, which a logging handler may call
    from any thread.

    ``markdown`` renders answers as Markdown (else as plain text, as streamed);
    ``preview_chars`` folds tool arguments and results; ``clock`` is the time source of
    the spinner and the elapsed times (a test passes a fake one).
    """

    def __init__(
        self,
        console: Console,
        *,
        markdown: bool = True,
        preview_chars: int = 120,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.markdown = markdown
        self.preview_chars = preview_chars
        self.clock = clock
        self.live: Live | None = None
        self.active = False  # a turn is being shown
        self.held = 0  # pause() depth: the live region is down while > 0
        self.text = ""  # the part of the answer not printed for good yet
        self.blocks = 0  # blocks of the current answer printed for good
        self.reasoning = ""
        self.running: dict[str, _Running] = {}
        self.waiting: float | None = None  # the spinner shows since then
        self.started = 0.0  # the turn's start
        self.state: str | None = None  # the status line (a retry), while waiting
        self.open = False  # the last line written has no newline yet
        self.logs: deque[Text] = deque()
        self.dirty = False
        self.drawn = 0.0  # the last redraw
        self.thread = threading.get_ident()

    # -- plain output ---------------------------------------------------------------------

    def print(self, renderable: RenderableType, *, crop: bool = False) -> None:
        """Print ``renderable`` for good (above the live region while there is one);
        ``crop`` cuts each line at the screen's width (with ``…``) instead of wrapping."""
        self.end_line()
        if crop:
            self.console.print(renderable, no_wrap=True, overflow="ellipsis")
        else:
            self.console.print(renderable)

    def note(self, line: str, style: str = "dim") -> None:
        """One line, after what the answer has written so far."""
        self.flush()
        self.print(Text(line, style=style))

    def say(self, text: str) -> None:
        """Whole lines, unstyled (command output)."""
        self.flush()
        self.end_line()
        self.console.print(Text(text.removesuffix("\n")))

    def write(self, text: str) -> None:
        """Text as it is, without ending the line (a question and its answer)."""
        self.console.print(Text(text), end="")
        self.open = not text.endswith("\n")

    def end_line(self) -> None:
        if self.open:
            self.open = False
            self.console.print()

    def log(self, line: str) -> None:
        """A log record's line; shown at the next redraw (any thread)."""
        self.logs.append(Text(line, style="yellow"))
        self.dirty = True
        self._redraw_if_here()

    def status(self, text: str) -> None:
        """The spinner's text until the next output (a retry's notice; any thread)."""
        self.state = text
        self.dirty = True
        self._redraw_if_here()

    def _redraw_if_here(self) -> None:
        if threading.get_ident() == self.thread:
            self.redraw(now=True)

    def flush_logs(self) -> None:
        while self.logs:
            self.print(self.logs.popleft())

    # -- a turn ---------------------------------------------------------------------------

    def begin(self) -> None:
        """A turn starts: the spinner shows until its first output."""
        self.flush_logs()
        self.active = True
        self.started = self.waiting = self.clock()
        self.state = None
        self.blocks = 0
        self._start_live()

    def end(self, line: Text) -> None:
        """The turn is over: what is left of the answer is printed, the live region
        goes, and ``line`` (the token line) follows."""
        self.flush()
        self.running.clear()
        self.waiting = None
        self.active = False
        self._stop_live()
        self.flush_logs()
        self.print(line)

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    def answer(self, delta: str) -> None:
        """A piece of the answer."""
        self._flush_reasoning()
        self.waiting = self.state = None
        first = not self.text
        self.text += delta
        if "\n" in delta:
            self._print_complete()
        self.redraw(now=first)

    def think(self, delta: str) -> None:
        """A piece of the model's reasoning (shown dim)."""
        self.waiting = None
        first = not self.reasoning
        self.reasoning += delta
        self.redraw(now=first)

    def call(self, call_id: str, name: str, arguments: str) -> None:
        """A tool call started: it shows, with a spinner, until its result."""
        self.flush()
        self.waiting = None
        label = _call_label(name, arguments, self.preview_chars)
        self.running[call_id] = _Running(label, self.clock())
        self.redraw(now=True)

    def result(self, result: Mapping[str, Any], arguments: str) -> None:
        """A tool call returned (``result``: its ``tool/result`` data): its one line,
        for good."""
        self.running.pop(result["call_id"], None)
        self.print(tool_line(result, arguments, self.preview_chars), crop=True)
        if not self.running and self.active:
            self.waiting = self.clock()
            self.state = None
        self.redraw(now=True)

    def flush(self) -> None:
        """Print the whole answer so far for good (before a line that must follow it)."""
        self._flush_reasoning()
        if self.text:
            text, self.text = self.text, ""
            self._print_blocks(text)
            self.blocks = 0
            self.redraw(now=True)

    def _flush_reasoning(self) -> None:
        if self.reasoning:
            text, self.reasoning = self.reasoning, ""
            self.print(Text(text.strip("\n"), style="dim italic"))

    def _print_complete(self) -> None:
        if self.markdown:
            complete, self.text = split_blocks(self.text)
        else:
            end = self.text.rindex("\n") + 1
            complete, self.text = self.text[:end], self.text[end:]
        if complete:
            self._print_blocks(complete)

    def _print_blocks(self, text: str) -> None:
        if not self.markdown:
            self.console.print(Text(text.removesuffix("\n")))
            return
        lines = self._rendered(text)
        if lines:
            self.blocks += 1
            self.print(_Lines(lines))

    def _rendered(self, text: str) -> list[list[Segment]]:
        """``text`` as Markdown lines, a blank line first when blocks of the same
        answer came before (rich separates top-level blocks so)."""
        lines = _trimmed(self.console.render_lines(Markdown(text), pad=False))
        if lines and self.blocks:
            lines.insert(0, [])
        return lines

    # -- the live region ------------------------------------------------------------------

    def region(self) -> Iterator[RenderableType]:
        """What the live region shows now."""
        now = self.clock()
        if self.reasoning:
            yield Text(self.reasoning.strip("\n"), style="dim italic")
        if self.text:
            if self.markdown:
                yield _Lines(self._rendered(self.text))
            else:
                yield Text(self.text)
        for running in self.running.values():
            yield _spinning(now, running.since, running.since, running.label)
        if self.waiting is not None or self.state is not None:
            since = self.started if self.waiting is None else self.waiting
            yield _spinning(now, since, self.started, self.state or "working…")

    def redraw(self, *, now: bool = False) -> None:
        """Draw the live region again: at once with ``now``, else at most every
        :data:`REDRAW` seconds (a later :meth:`tick` draws what was skipped)."""
        if not self.active:
            return
        self.flush_logs()
        live = self.live
        if live is None:
            return
        clock = self.clock()
        if now or clock - self.drawn >= REDRAW:
            self.drawn = clock
            self.dirty = False
            live.refresh()
        else:
            self.dirty = True

    def tick(self) -> None:
        """The spinner's heartbeat (the chat calls it every frame while a turn runs)."""
        if self.dirty or self.waiting is not None or self.running:
            self.redraw(now=True)

    def _start_live(self) -> None:
        self.live = Live(
            _Region(self),
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.live.start(refresh=True)
        self.drawn = self.clock()

    def _stop_live(self) -> None:
        live, self.live = self.live, None
        if live is not None:
            live.stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Take the live region down meanwhile (a question is asked)."""
        self.flush()
        self.held += 1
        self._stop_live()
        try:
            yield
        finally:
            self.held -= 1
            self.end_line()
            if self.active and not self.held:
                self._start_live()


def _spinning(now: float, since: float, start: float, label: str) -> Text:
    """A spinner line: the frame for the time since ``since``, ``label``, the seconds
    since ``start``; one line, cut at the screen's width."""
    frames, interval = SPINNER
    frame = frames[int((now - since) / interval) % len(frames)]
    line = Text.assemble((frame, "cyan"), (f" {label}", "dim"), (f" · {now - start:.1f}s", "dim"))
    line.no_wrap = True
    line.overflow = "ellipsis"
    return line
