"""After ``collection_paused``, what the block made is in the collector's oldest
generation, unless objects are frozen (RFC 0055)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dsh import _startup


def generation_of(marker: object) -> int | None:
    return next(
        (n for n in range(3) if any(o is marker for o in gc.get_objects(generation=n))), None
    )


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's state as the test found it, afterwards."""
    was = gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


@pytest.mark.usefixtures("collector")
def test_what_a_paused_block_made_is_in_the_oldest_generation_after_it() -> None:
    gc.enable()
    with _startup.collection_paused():
        marker: list[object] = []
        assert generation_of(marker) == 0
    assert generation_of(marker) == 2
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("collector")
def test_frozen_objects_stay_frozen_and_a_collector_that_was_off_is_left_alone() -> None:
    gc.disable()
    with _startup.collection_paused():
        marker: list[object] = []
    assert generation_of(marker) == 0  # no collection ran, nothing was moved
    gc.freeze()
    frozen = gc.get_freeze_count()
    gc.enable()
    with _startup.collection_paused():
        made: list[object] = []
    gc.disable()  # no collection moves it from here on
    assert gc.get_freeze_count() == frozen
    assert generation_of(made) == 0
