"""Prompt benchmark: assemble + render beside compiled Jinja2 and a floor, in one run.

Run: ``.venv/bin/python -m bench.prompt`` (needs the ``bench`` extra for Jinja2;
``--quick`` for a smoke run, ``--profile`` to also print cProfile call counts at S=100).

The workload: S sections (10/100/1000) contributed by one plugin, T tools (10/100) from
one provider, 20 variables (each a provider function, so each assembly calls them),
each section referencing two variables. The rows, interleaved round by round:

* jinja2 render only: the whole prompt as one template (``StrictUndefined``), compiled
  once, rendered with the 20 values: the peer every ratio is taken against;
* floor: sections pre-sorted, one ``"\\n\\n".join`` and one ``re.sub`` over a dict;
* dsh render: ``render_prompt`` of a plain ``PromptAssembly`` holding the same sections
  (not one from ``assemble()``, whose sections were never read), with the scan cache
  warm and the same values as the render before (what a step renders when nothing
  changed), with values that change at every render (one value alternates, for
  Jinja2 too), and with the scan cache cleared before every render (every section
  scanned and the whole prompt planned again);
* dsh assemble: ``await assemble()`` alone (layers, the 20 variable providers, the tool
  provider, tool order, the waterfall), its per-scope cache warm;
* dsh assemble + render: both, as the agent loop does at each step; and the same
  reading ``assembly.tools`` too (the fresh copies every caller may mutate).

Every rendered prompt is checked (untimed) against Jinja2's, so no row can do less.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import jinja2

import dsh
from bench._timing import Row, measure_async, print_table
from dsh_system_prompt import (
    AssembleContext,
    PromptAssembly,
    PromptSection,
    SystemPrompt,
    ToolProviderResult,
    ToolSchema,
    render_prompt,
)
from dsh_system_prompt import _render as render_module

VARIABLES = {f"v{i}": f"value-{i}" for i in range(20)}
REFERENCE = re.compile(r"\{\{([a-z][a-z0-9_]*)\}\}")
PERSONA = "You are bench-agent."
IDENTITY = "You are an AI agent powered by dsh."

#: The values the changing rows alternate with (one value differs).
OTHER_VARIABLES = {**VARIABLES, "v3": "other-3"}

PEER = "jinja2 render only"
ROWS = [
    PEER,
    "floor (join + re.sub)",
    "dsh render, same values",
    "dsh render, values change",
    "dsh render, scan cache cleared",
    "dsh assemble",
    "dsh assemble + render",
    "dsh assemble + render + .tools",
]


def section_text(i: int) -> str:
    return (
        f"Section {i}: follow rule {i} carefully, using {{{{v{i % 20}}}}} "
        f"and {{{{v{(i * 7) % 20}}}}} where they apply."
    )


def tool_schemas(count: int) -> list[ToolSchema]:
    return [
        ToolSchema(
            name=f"tool_{i:04d}",
            description=f"Tool number {i}.",
            parameters={
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        )
        for i in range(count)
    ]


def contributor(sections: int, tools: int) -> Callable[[dsh.Context, None], Iterator[Any]]:
    schemas = tool_schemas(tools)

    def apply(ctx: dsh.Context, config: None) -> Iterator[Any]:
        prompt = ctx.system_prompt
        for i in range(sections):
            # Registered out of order so assembly has real sorting to do.
            yield prompt.section(
                PromptSection(name=f"s{i}", order=(i * 37) % sections, text=section_text(i))
            )
        for name, value in VARIABLES.items():
            yield prompt.variable(name, lambda context, value=value: value)
        yield prompt.tools(lambda context: ToolProviderResult(schemas=schemas))

    apply.inject = ["system_prompt"]  # type: ignore[attr-defined]
    return apply


def ordered_texts(sections: int) -> list[str]:
    """The section texts in render order (what the floor and Jinja2 get)."""
    by_order = sorted(range(sections), key=lambda i: (i * 37) % sections)
    return [IDENTITY, PERSONA, *(section_text(i) for i in by_order)]


def floor_render(texts: list[str]) -> str:
    return REFERENCE.sub(lambda m: VARIABLES[m.group(1)], "\n\n".join(texts))


def clear_scan_cache() -> None:
    """Forget every compiled section text (the renderer's scan cache)."""
    render_module.clear_cache()


def _repeat(fn: Callable[[], object], ops: int) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        for _ in range(ops):
            fn()

    return run


def _alternating(fn: Callable[[dict[str, str]], object]) -> Callable[[], object]:
    """``fn`` called with VARIABLES and OTHER_VARIABLES in turn."""
    turn = [VARIABLES, OTHER_VARIABLES]

    def call() -> object:
        turn.reverse()
        return fn(turn[0])

    return call


async def measure_column(sections: int, tools: int, ops: int, rounds: int) -> dict[str, float]:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    async with dsh.Context() as root:
        await root.plugin(SystemPrompt, {"persona": PERSONA})
        await root.plugin(contributor(sections, tools))
        prompt = root.system_prompt
        context = AssembleContext()
        built = await prompt.assemble(context)
        expected = render_prompt(built)
        # A plain assembly: render_prompt reads its sections like any caller's.
        assembly = PromptAssembly(
            sections=list(built.sections), tools=[], variables=dict(VARIABLES)
        )
        other = PromptAssembly(
            sections=assembly.sections, tools=[], variables=dict(OTHER_VARIABLES)
        )
        texts = ordered_texts(sections)
        template = "\n\n".join(texts).replace("{{", "{{ ").replace("}}", " }}")
        compiled = env.from_string(template)
        assert compiled.render(VARIABLES) == expected == floor_render(texts)
        assert render_prompt(assembly) == expected
        assert render_prompt(other) == compiled.render(OTHER_VARIABLES)
        pair = [assembly, other]

        def changing() -> str:
            pair.reverse()
            return render_prompt(pair[0])

        def cleared() -> str:
            clear_scan_cache()
            return changing()

        async def assemble_only() -> None:
            for _ in range(ops):
                await prompt.assemble(context)

        async def assemble_render() -> None:
            for _ in range(ops):
                render_prompt(await prompt.assemble(context))

        async def with_tools() -> None:
            for _ in range(ops):
                built = await prompt.assemble(context)
                render_prompt(built)
                assert len(built.tools) == tools

        assert render_prompt(await prompt.assemble(context)) == expected
        fns: dict[str, Callable[[], Awaitable[object]]] = {
            PEER: _repeat(_alternating(compiled.render), ops),
            "floor (join + re.sub)": _repeat(lambda: floor_render(texts), ops),
            "dsh render, same values": _repeat(lambda: render_prompt(assembly), ops),
            "dsh render, values change": _repeat(changing, ops),
            "dsh render, scan cache cleared": _repeat(cleared, ops),
            "dsh assemble": assemble_only,
            "dsh assemble + render": assemble_render,
            "dsh assemble + render + .tools": with_tools,
        }
        return await measure_async(fns, ops, rounds)


async def profile(sections: int, tools: int) -> None:
    """cProfile call counts (noise-free) of one assemble + render at ``sections``."""
    async with dsh.Context() as root:
        await root.plugin(SystemPrompt, {"persona": PERSONA})
        await root.plugin(contributor(sections, tools))
        prompt = root.system_prompt
        context = AssembleContext()
        built = await prompt.assemble(context)
        plain = PromptAssembly(sections=list(built.sections), tools=[], variables=built.variables)
        render_prompt(plain)  # warm

        async def step() -> None:
            render_prompt(await prompt.assemble(context))

        async def render_cleared() -> None:
            clear_scan_cache()
            render_prompt(plain)

        runs = (("assemble + render", step), ("render, scan cache cleared", render_cleared))
        for label, run in runs:
            await run()  # warm
            profiler = cProfile.Profile()
            profiler.enable()
            await run()
            profiler.disable()
            stats = pstats.Stats(profiler, stream=io.StringIO())
            calls = sum(entry[1] for entry in stats.stats.values())  # type: ignore[attr-defined]
            print(f"{label}, S={sections}, T={tools}: {calls} Python calls")


async def run(quick: bool) -> list[tuple[int, list[Row]]]:
    section_counts = [10, 100, 1000]
    tool_counts = [10, 100]
    rounds = 3 if quick else 15
    tables = []
    for tools in tool_counts:
        rows: dict[str, dict[str, float]] = {name: {} for name in ROWS}
        for sections in section_counts:
            ops = max(1, (2000 if not quick else 50) // sections)
            result = await measure_column(sections, tools, ops, rounds)
            for name, value in result.items():
                rows[name][f"S={sections}"] = value
        tables.append((tools, list(rows.items())))
    return tables


async def main(quick: bool, with_profile: bool) -> None:
    print(f"dsh prompt benchmark (python {sys.version.split()[0]}, jinja2 {jinja2.__version__})")
    for tools, rows in await run(quick):
        columns = list(rows[0][1])
        print_table(f"20 variables, T={tools} tools", columns, rows, PEER, "us")
    if with_profile:
        print()
        await profile(100, 10)


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv, "--profile" in sys.argv)
