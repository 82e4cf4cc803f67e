"""The filesystem seam: canonical paths, text reads, atomic writes, versions, search.

YAML name ``fs``; service ``Filesystem`` at ctx key ``fs``. An implementation
(``fs-local``) sets the backend, a policy (``fs-policy``) may guard mutations, and the
model reaches it through ``tool-fs``. See this package's README for the contract.
"""

from __future__ import annotations

from ._errors import (
    FsError,
    FsIOError,
    FsNotDirectoryError,
    FsNotFoundError,
    FsNotObservedError,
    FsNotRegularFileError,
    FsNotTextError,
    FsReadDeniedError,
    FsSandboxDeniedError,
    FsSetupError,
    FsStaleVersionError,
    not_observed_message,
    stale_message,
)
from ._glob import compile_glob, split_glob
from ._service import TEXT_PROBE, Filesystem, FilesystemConfig, session_cwd
from ._types import (
    Approve,
    Change,
    Commit,
    CommitHook,
    FileEntry,
    FileText,
    FsBackend,
    FsPolicy,
    Listing,
    Match,
    MutationKind,
    Precondition,
    SearchQuery,
    SearchResult,
    Version,
    WriteOutcome,
)

plugin = Filesystem

__all__ = [
    "TEXT_PROBE",
    "Approve",
    "Change",
    "Commit",
    "CommitHook",
    "FileEntry",
    "FileText",
    "Filesystem",
    "FilesystemConfig",
    "FsBackend",
    "FsError",
    "FsIOError",
    "FsNotDirectoryError",
    "FsNotFoundError",
    "FsNotObservedError",
    "FsNotRegularFileError",
    "FsNotTextError",
    "FsPolicy",
    "FsReadDeniedError",
    "FsSandboxDeniedError",
    "FsSetupError",
    "FsStaleVersionError",
    "Listing",
    "Match",
    "MutationKind",
    "Precondition",
    "SearchQuery",
    "SearchResult",
    "Version",
    "WriteOutcome",
    "compile_glob",
    "not_observed_message",
    "plugin",
    "session_cwd",
    "split_glob",
    "stale_message",
]
