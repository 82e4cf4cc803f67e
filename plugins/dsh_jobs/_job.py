"""One background job: a command started through the bash seam and left running."""

from __future__ import annotations

import anyio

from dsh_bash import BashRun, OutputSlice

__all__ = ["Job"]


class Job:
    """A background command of one session (``session_id``; None without an agent).

    ``run`` is the live command once it has started (its streams fill as it writes,
    and ``run.result`` is set when it ends); ``status`` is ``running``, ``exited <N>``
    or ``killed <SIG>`` (``failed`` when the executor raised without a result).
    """

    def __init__(self, job_id: str, command: str, session_id: str | None) -> None:
        self.id = job_id
        self.command = command
        self.session_id = session_id
        self.run: BashRun | None = None
        self.error: BaseException | None = None
        self.scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._read = [0, 0]

    def __repr__(self) -> str:
        return f"<Job {self.id} [{self.status}] {self.command!r}>"

    @property
    def finished(self) -> bool:
        """True once the command has ended (or could not go on)."""
        return self._done.is_set()

    @property
    def status(self) -> str:
        """``running``, ``exited <N>``, ``killed <SIG>``, or ``failed``."""
        if not self.finished:
            return "running"
        result = None if self.run is None else self.run.result
        if result is None:
            return "failed"
        if result.signal is not None:
            return f"killed {result.signal}"
        return f"exited {result.exit_code}"

    def end(self) -> None:
        """Mark the job finished (its driver calls this last)."""
        self._done.set()

    async def wait(self) -> None:
        """Wait until the job has finished (bound it with ``anyio.move_on_after``)."""
        await self._done.wait()

    def read_new(self) -> tuple[OutputSlice, OutputSlice]:
        """The stdout and stderr written since the previous call (the first call: since
        the start), each from what memory still holds."""
        run = self.run
        assert run is not None  # a job is listed only once its command has started
        final = self.finished
        slices = (
            run.stdout.read_since(self._read[0], final=final),
            run.stderr.read_since(self._read[1], final=final),
        )
        self._read = [slices[0].end, slices[1].end]
        return slices
