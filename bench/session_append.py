"""Session append benchmark: the cost of durability policies for a JSONL session log.

Run: ``.venv/bin/python -m bench.session_append`` (``--quick`` for a smoke run,
``--records N``, ``--rounds R``, ``--dir PATH`` to write somewhere else than the system
temp directory: on tmpfs an fsync costs nothing and every policy looks the same).

One workload, a realistic agent log: turns of two tool-call steps and one answer step,
each step streaming 30 chunks (about 11% of the records commit state). The policies,
run interleaved in the same process, each on a fresh file per round:

* ``dsh session-jsonl``: the real path, ``Session.append`` -> ``session/event`` ->
  the plugin (encode, buffer, write + fsync per commit record and per ``step/end``),
  each chunk appended as its own ``assistant/chunk`` record;
* ``dsh, chunks packed``: the same, the chunks recorded with ``Session.append_chunk``
  as the agent loop does, so each step's chunks are written as one packed row;
* ``raw fsync per commit``: the same policy without the framework (encode, buffer,
  write and fsync at each durable record);
* ``raw fsync per record``: write and fsync every line;
* ``raw fsync per 100``: write and fsync every 100 lines (a time-window batcher);
* ``floor: buffered, no fsync``: a buffered file, one ``write`` per line, no fsync.

Every policy encodes the records inside the timed section (``json.dumps`` as the
plugin does), so the rows differ by what they write and sync, and the dsh row by the
framework path on top (event dispatch, buffering, file creation).

Reported: median wall time per round, microseconds per record, fsyncs per round, and
the ratio to the floor. Each run checks its file holds every record, so the workload
cannot shrink.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from dsh import Context
from dsh_llm import Message, TextBlock, TextDelta, ToolCallBlock
from dsh_session import CHUNKS_ROW, Sessions
from dsh_session_jsonl import DURABLE_EVENTS, FILE_NAME, JsonlSessions

Record = tuple[str, dict[str, Any]]
CHUNKS_PER_STEP = 30


def _step(turn: int, step: int, tool: bool) -> list[Record]:
    records: list[Record] = [
        ("step/start", {"turn": turn, "step": step}),
        ("request/header", {"turn": turn, "step": step, "header": {"model": "m", "tools": []}}),
    ]
    for i in range(CHUNKS_PER_STEP):
        chunk = {"type": "text-delta", "index": 0, "text": f"token {i} of a streamed answer "}
        records.append(("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk}))
    blocks: list[Any] = [TextBlock("a streamed answer " * 10)]
    if tool:
        blocks.append(ToolCallBlock(f"call-{turn}-{step}", "read", '{"path": "README.md"}'))
    message = Message("assistant", tuple(blocks)).to_json()
    records.append(("assistant/message", {"turn": turn, "step": step, "message": message}))
    if tool:
        call = {"turn": turn, "step": step, "call_id": f"call-{turn}-{step}", "name": "read"}
        records.append(("tool/call", {**call, "arguments": '{"path": "README.md"}'}))
        content = "file contents " * 40
        records.append(("tool/result", {**call, "content": content, "is_error": False}))
    records.append(("step/end", {"turn": turn, "step": step}))
    return records


def workload(count: int) -> list[Record]:
    """At least ``count`` records of whole turns, cut to ``count``."""
    records: list[Record] = []
    turn = 0
    while len(records) < count:
        turn += 1
        records.append(("turn/start", {"turn": turn}))
        text = Message.user(f"question {turn}: please read the README").to_json()
        records.append(("user/message", {"turn": turn, "step": 1, "message": text}))
        records += _step(turn, 1, tool=True) + _step(turn, 2, tool=True)
        records += _step(turn, 3, tool=False)
        records.append(("turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
    return records[:count]


def _lines(records: list[Record]) -> list[tuple[bool, bytes]]:
    """Encode every record as the plugin does (timed: part of appending)."""
    out = []
    now = time.time()
    for seq, (kind, data) in enumerate(records):
        record = {"seq": seq, "type": kind, "time": now, "data": data}
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        out.append((kind in DURABLE_EVENTS, line))
    return out


def _open(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)


def raw_per_commit(path: Path, records: list[Record]) -> int:
    lines = _lines(records)
    fd, syncs, pending = _open(path), 0, []
    for durable, line in lines:
        pending.append(line)
        if durable:
            os.write(fd, b"".join(pending))
            pending.clear()
            os.fsync(fd)
            syncs += 1
    if pending:
        os.write(fd, b"".join(pending))
    os.close(fd)
    return syncs


def raw_per_record(path: Path, records: list[Record]) -> int:
    lines = _lines(records)
    fd = _open(path)
    for _, line in lines:
        os.write(fd, line)
        os.fsync(fd)
    os.close(fd)
    return len(lines)


def raw_per_batch(path: Path, records: list[Record], batch: int = 100) -> int:
    lines = _lines(records)
    fd, syncs = _open(path), 0
    for start in range(0, len(lines), batch):
        os.write(fd, b"".join(line for _, line in lines[start : start + batch]))
        os.fsync(fd)
        syncs += 1
    os.close(fd)
    return syncs


def floor(path: Path, records: list[Record]) -> int:
    lines = _lines(records)
    with path.open("wb") as file:
        for _, line in lines:
            file.write(line)
    return 0


def _count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def _stored_events(path: Path) -> int:
    """The events a session file holds (a packed row holds one per chunk)."""
    rows = [json.loads(line) for line in path.read_bytes().splitlines()[1:]]
    return sum(len(r["data"]["chunks"]) if r["type"] == CHUNKS_ROW else 1 for r in rows)


def _syncs_of(fn: Callable[[], None]) -> int:
    real, count = os.fsync, [0]

    def counting(fd: Any) -> None:
        count[0] += 1
        real(fd)

    os.fsync = counting
    try:
        fn()
    finally:
        os.fsync = real
    return count[0]


async def run(records: int, rounds: int, base: Path) -> None:
    work = workload(records)
    lines = _lines(work)
    commits = sum(durable for durable, _ in lines)
    raw: dict[str, Callable[[Path, list[Record]], int]] = {
        "raw fsync per commit": raw_per_commit,
        "raw fsync per record": raw_per_record,
        "raw fsync per 100": raw_per_batch,
        "floor: buffered, no fsync": floor,
    }
    names = ["dsh session-jsonl", "dsh, chunks packed", *raw]
    chunks = {
        i: TextDelta(0, data["chunk"]["text"])
        for i, (kind, data) in enumerate(work)
        if kind == "assistant/chunk"
    }
    samples: dict[str, list[float]] = {name: [] for name in names}
    syncs: dict[str, int] = {}
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        await ctx.plugin(JsonlSessions, {"root": str(base / "dsh")})
        for r in range(rounds):
            session = ctx.sessions.create(id=f"round-{r}")

            def append_all(session: Any = session) -> None:
                for kind, data in work:
                    session.append(kind, data)

            start = time.perf_counter()
            syncs["dsh session-jsonl"] = _syncs_of(append_all)
            samples["dsh session-jsonl"].append(time.perf_counter() - start)
            path = base / "dsh" / session.id / FILE_NAME
            # Every record but a trailing uncommitted tail is on disk (+ the header).
            tail = len(lines) - max(i for i, (d, _) in enumerate(lines) if d) - 1
            assert _count_lines(path) == len(lines) + 1 - tail, path
            packed = ctx.sessions.create(id=f"packed-{r}")

            def append_packed(session: Any = packed) -> None:
                for i, (kind, data) in enumerate(work):
                    chunk = chunks.get(i)
                    if chunk is None:
                        session.append(kind, data)
                    else:
                        session.append_chunk(data["turn"], data["step"], chunk)

            start = time.perf_counter()
            syncs["dsh, chunks packed"] = _syncs_of(append_packed)
            samples["dsh, chunks packed"].append(time.perf_counter() - start)
            # Each step's chunks are one row; read back, every record is there.
            assert _stored_events(base / "dsh" / packed.id / FILE_NAME) == len(lines) - tail
            for name, fn in raw.items():
                target = base / f"{name.replace(' ', '-').replace(':', '').replace(',', '')}.jsonl"
                start = time.perf_counter()
                syncs[name] = fn(target, work)
                samples[name].append(time.perf_counter() - start)
                assert _count_lines(target) == len(lines), name
    base_time = statistics.median(samples["floor: buffered, no fsync"])
    print(
        f"\nsession append: {len(lines)} records ({commits} durable: commits + step ends), "
        f"{rounds} rounds, median per round, in {base}"
    )
    width = max(map(len, names))
    print(f"{'':<{width}}  {'ms/round':>10}  {'us/record':>10}  {'fsyncs':>7}  {'x floor':>9}")
    for name in names:
        median = statistics.median(samples[name])
        print(
            f"{name:<{width}}  {median * 1e3:>10.1f}  {median / len(lines) * 1e6:>10.2f}  "
            f"{syncs[name]:>7}  {median / base_time:>8.1f}x"
        )
    dsh = statistics.median(samples["dsh session-jsonl"])
    packed = statistics.median(samples["dsh, chunks packed"])
    same_policy = statistics.median(samples["raw fsync per commit"])
    per_record = statistics.median(samples["raw fsync per record"])
    print(
        f"\ndsh vs raw with the same policy: {dsh / same_policy:.2f}x (chunks packed: "
        f"{packed / same_policy:.2f}x); fsync per record vs per commit: "
        f"{per_record / same_policy:.1f}x"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 records, 3 rounds")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (a real disk)")
    args = parser.parse_args(argv)
    records, rounds = (2_000, 3) if args.quick else (args.records, args.rounds)
    base = Path(tempfile.mkdtemp(prefix="dsh-bench-", dir=args.dir))
    try:
        anyio.run(run, records, rounds, base)
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
