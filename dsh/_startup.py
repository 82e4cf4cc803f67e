"""How the ``dsh`` command starts: its code is imported with the cyclic garbage
collector paused (docs/rfc/0045), and what it made is then moved to the collector's
oldest generation (docs/rfc/0055).

Importing the command line, a command and a deployment's plugins makes many objects
(classes, functions, pydantic models) that all live on, so the collections they
trigger free next to nothing: without them a one-shot ``dsh run`` spends several
percent less time.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collection_paused", "main"]


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Within the block the cyclic garbage collector does not run; after it, it runs
    again if it did before, and what the block made is in the collector's oldest
    generation (see :func:`_promote`)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            _promote()
            gc.enable()


def _promote() -> None:
    """Moves every object the collector tracks to its oldest generation, where objects
    that live on end up anyway, without the collections of the younger generations
    that would take them there scanning them first (docs/rfc/0055): after loading
    code, they would scan tens of thousands of objects to free a few hundred. Those few
    (discarded classes and functions, a parser's help formatters) are freed by the next
    full collection, or at exit. Not done while objects are frozen (``gc.freeze()``):
    they would be unfrozen."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def main() -> int:
    """The ``dsh`` console script and ``python -m dsh``: :func:`dsh.cli.main`, its
    module imported under :func:`collection_paused` (as ``main`` itself imports the
    command and ``run_deployment_command`` loads the deployment)."""
    with collection_paused():
        from .cli import main as run

    return run()
