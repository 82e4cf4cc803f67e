"""Workspace snapshots in a shadow git repository kept in the store, never in the
user's tree: ``git --git-dir=<store>/shadow.git --work-tree=<root>``."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from ._errors import CheckpointSnapshotError

__all__ = ["SNAPSHOT_REF", "ShadowRepo"]

#: The ref holding the latest snapshot (each commit's parent is the one before).
SNAPSHOT_REF = "refs/dsh/snapshots"

_IDENTITY = {
    "GIT_AUTHOR_NAME": "dsh",
    "GIT_AUTHOR_EMAIL": "dsh@localhost",
    "GIT_COMMITTER_NAME": "dsh",
    "GIT_COMMITTER_EMAIL": "dsh@localhost",
}


class ShadowRepo:
    """Snapshots of ``root`` in the bare repository ``git_dir``; what the work tree's
    ``.gitignore`` files exclude stays out, and so does the store itself."""

    def __init__(self, git_dir: Path, root: Path) -> None:
        self.git_dir = git_dir
        self.root = root
        self._lock = anyio.Lock()
        #: The latest snapshot's commit and tree, once known.
        self._last: tuple[str, str] | None = None

    async def _git(self, *args: str) -> str:
        env = {
            **os.environ,
            **_IDENTITY,
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.root),
        }
        try:
            done = await anyio.run_process(["git", *args], env=env, cwd=self.root, check=False)
        except OSError as exc:
            raise CheckpointSnapshotError(
                f"cannot snapshot {self.root}: git cannot run ({exc.strerror or exc})"
            ) from None
        if done.returncode != 0:
            raise CheckpointSnapshotError(
                f"cannot snapshot {self.root}: git {args[0]} failed: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )
        return done.stdout.decode().strip()

    async def _init(self) -> None:
        if (self.git_dir / "HEAD").exists():
            return
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        await self._git("init", "--quiet")
        exclude = self.git_dir / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        lines = ["/.dsh/checkpoints/"]
        try:
            inside = self.git_dir.parent.relative_to(self.root)
        except ValueError:
            pass
        else:
            lines.append(f"/{inside.as_posix()}/")
        exclude.write_text("\n".join(lines) + "\n")

    async def snapshot(self) -> str:
        """Commit the workspace as it is now and return the commit (the previous
        snapshot's commit when nothing changed)."""
        async with self._lock:
            await self._init()
            await self._git("add", "--all", ".")
            tree = await self._git("write-tree")
            if self._last is None:
                self._last = await self._latest()
            if self._last is not None and self._last[1] == tree:
                return self._last[0]
            args = ["commit-tree", tree, "-m", "dsh checkpoint"]
            if self._last is not None:
                args += ["-p", self._last[0]]
            commit = await self._git(*args)
            await self._git("update-ref", SNAPSHOT_REF, commit)
            self._last = (commit, tree)
            return commit

    async def _latest(self) -> tuple[str, str] | None:
        """The latest snapshot's commit and tree (None before the first)."""
        try:
            found = await self._git(
                "rev-parse", "--verify", "--quiet", f"{SNAPSHOT_REF}^{{commit}}"
            )
        except CheckpointSnapshotError:
            return None
        return found, await self._git("rev-parse", f"{found}^{{tree}}")
