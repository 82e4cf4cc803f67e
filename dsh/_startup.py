"""How the ``dsh`` command starts: its code is imported with the cyclic garbage
collector paused (docs/rfc/0045).

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
    again if it did before."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


def main() -> int:
    """The ``dsh`` console script and ``python -m dsh``: :func:`dsh.cli.main`, its
    module imported under :func:`collection_paused` (as ``main`` itself imports the
    command and ``run_deployment_command`` loads the deployment)."""
    with collection_paused():
        from .cli import main as run

    return run()
