"""Prompt benchmark: assemble + render beside a floor and Jinja2, in one run.

Run: ``.venv/bin/python -m bench.prompt`` (needs the ``bench`` extra for Jinja2;
``--quick`` for a smoke run).

The workload: S sections (10/100/1000) contributed by one plugin, T tools (10/100) from
one provider, 20 variables, each section referencing two variables. dsh does the whole
``assemble()`` (layers, variables, sort, tool copy and order, the waterfall) and then
``render_prompt``. Peers render the same text:

* floor: sections pre-sorted, one ``"\\n\\n".join`` and one ``re.sub`` over a dict;
* jinja2: the joined text as one template with ``StrictUndefined``, compiled per render
  (the sections change between renders) and, for reference, compiled once.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import anyio
import jinja2

import dsh
from bench._timing import Row, measure, measure_async, print_table
from dsh_system_prompt import (
    AssembleContext,
    PromptSection,
    SystemPrompt,
    ToolProviderResult,
    ToolSchema,
    render_prompt,
)

VARIABLES = {f"v{i}": f"value-{i}" for i in range(20)}
REFERENCE = re.compile(r"\{\{([a-z][a-z0-9_]*)\}\}")


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


def contributor(sections: int, tools: int) -> Any:
    schemas = tool_schemas(tools)

    def apply(ctx: dsh.Context, config: None) -> Any:
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


def floor_render(texts: list[str]) -> str:
    joined = "\n\n".join(texts)
    return REFERENCE.sub(lambda m: VARIABLES[m.group(1)], joined)


async def run(quick: bool) -> tuple[list[Row], list[Row]]:
    section_counts = [10, 100, 1000]
    tool_counts = [10, 100]
    rounds = 3 if quick else 15
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    rows: dict[str, dict[str, float]] = {
        "floor (join + re.sub)": {},
        "jinja2 compile+render": {},
        "jinja2 render only": {},
        "dsh assemble+render": {},
    }
    for tools in tool_counts:
        for sections in section_counts:
            ops = max(1, (2000 if not quick else 50) // sections)
            column = f"S={sections},T={tools}"
            async with dsh.Context() as root:
                await root.plugin(SystemPrompt, {"persona": "You are bench-agent."})
                await root.plugin(contributor(sections, tools))
                prompt = root.system_prompt
                context = AssembleContext()
                expected = render_prompt(await prompt.assemble(context))
                texts = [expected]  # pre-sorted input for the floor, same final text
                ordered = [
                    "You are an AI agent powered by dsh.",
                    "You are bench-agent.",
                    *[
                        section_text(i)
                        for i in sorted(range(sections), key=lambda i: (i * 37) % sections)
                    ],
                ]
                texts = ordered
                assert floor_render(texts) == expected
                template_text = "\n\n".join(texts).replace("{{", "{{ ").replace("}}", " }}")
                compiled = env.from_string(template_text)
                assert compiled.render(VARIABLES) == expected

                def floor(texts: list[str] = texts, ops: int = ops) -> None:
                    for _ in range(ops):
                        floor_render(texts)

                def jinja_full(source: str = template_text, ops: int = ops) -> None:
                    for _ in range(ops):
                        env.from_string(source).render(VARIABLES)

                def jinja_render(tpl: jinja2.Template = compiled, ops: int = ops) -> None:
                    for _ in range(ops):
                        tpl.render(VARIABLES)

                sync = measure(
                    {
                        "floor (join + re.sub)": floor,
                        "jinja2 compile+render": jinja_full,
                        "jinja2 render only": jinja_render,
                    },
                    ops,
                    rounds,
                )

                async def ours(
                    prompt: Any = prompt, context: Any = context, ops: int = ops
                ) -> None:
                    for _ in range(ops):
                        render_prompt(await prompt.assemble(context))

                mine = await measure_async({"dsh assemble+render": ours}, ops, rounds)
            for name, value in {**sync, **mine}.items():
                rows[name][column] = value
    by_tools = []
    for tools in tool_counts:
        columns = [f"S={s},T={tools}" for s in section_counts]
        by_tools.append([(name, {c: values[c] for c in columns}) for name, values in rows.items()])
    return by_tools[0], by_tools[1]


def main() -> None:
    quick = "--quick" in sys.argv
    print(f"dsh prompt benchmark (python {sys.version.split()[0]}, jinja2 {jinja2.__version__})")
    for rows in anyio.run(run, quick):
        columns = list(rows[0][1])
        print_table(
            "assemble + render (20 variables)", columns, rows, "floor (join + re.sub)", "us"
        )
        ours = dict(rows)["dsh assemble+render"]
        slope = [ours[c] / int(c.split(",")[0][2:]) for c in columns]
        print("dsh per section: " + ", ".join(f"{v * 1e6:.2f} us" for v in slope))


if __name__ == "__main__":
    main()
