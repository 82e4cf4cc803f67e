"""The faster ``__init__`` of the hot frozen records keeps them what ``dataclasses``
made (``dsh._record.fast_init``, which ``record`` applies)."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

import dsh_llm as llm
from dsh._record import fast_init


def _made() -> Any:
    @dataclass(frozen=True, slots=True)
    class Record:
        name: str
        count: int = 0
        kind: str = field(default="record", init=False)

    return Record


Plain = _made()
Fast = fast_init(_made())


def test_a_fast_record_is_made_as_its_dataclass_is() -> None:
    assert str(inspect.signature(Fast)) == str(inspect.signature(Plain))
    assert Fast.__init__.__qualname__ == Plain.__init__.__qualname__
    for args, kwargs in [(("a",), {}), (("a", 2), {}), ((), {"name": "a", "count": 3})]:
        fast, plain = Fast(*args, **kwargs), Plain(*args, **kwargs)
        assert repr(fast) == repr(plain)
        assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
    assert Fast("a").kind == "record"


def test_a_fast_record_compares_hashes_copies_and_refuses_assignment() -> None:
    record = Fast("a", 2)
    assert record == Fast("a", 2) != Fast("b", 2)
    assert hash(record) == hash(Fast("a", 2))
    assert dataclasses.replace(record, count=5) == Fast("a", 5)
    usage = llm.Usage(1, 2, reasoning_tokens=3)
    assert pickle.loads(pickle.dumps(usage)) == usage
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.count = 3
    with pytest.raises(TypeError):
        Fast()
    with pytest.raises(TypeError):
        Fast("a", kind="x")


def test_the_records_of_a_step_take_their_fields_by_name() -> None:
    request = llm.LlmRequest(model="m", messages=(), turn=2)
    assert (request.model, request.system, request.tools, request.turn) == ("m", None, (), 2)
    assert dataclasses.replace(request, step=3).step == 3
    assert llm.Usage(1, 2) == llm.Usage(input_tokens=1, output_tokens=2)
    assert llm.TextDelta(0, "x").type == "text-delta"
    names = list(inspect.signature(llm.Finish).parameters)
    assert names == ["reason", "failure"]


def test_a_record_s_post_init_still_checks_it() -> None:
    with pytest.raises(llm.LlmFormatError, match="unknown finish reason"):
        llm.Finish("later")  # type: ignore[arg-type]  # an unknown reason is the point
