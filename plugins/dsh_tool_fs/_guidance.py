"""The words the model reads: tool descriptions, parameters and guidance sections."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field
from pydantic_core import PydanticCustomError

from dsh_system_prompt import PromptSection

from ._config import ToolFsConfig
from ._render import GLOB_LIMIT, GREP_LIMIT

__all__ = [
    "SECTIONS",
    "EditArgs",
    "GlobArgs",
    "GrepArgs",
    "ReadArgs",
    "WriteArgs",
    "descriptions",
]

_PATH = "An absolute path, or a path relative to the working directory."


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise PydanticCustomError("nul_byte", "must not contain a NUL byte")
    return value


#: A string that reaches the operating system as (part of) a path: a NUL byte in it
#: is an invalid argument, named like any other (``file_path: must not contain …``).
_PathArg = Annotated[str, AfterValidator(_no_nul)]


class ReadArgs(BaseModel):
    file_path: _PathArg = Field(description=f"The file to read. {_PATH}")
    offset: int = Field(1, ge=1, description="The line number to start at (the first is 1).")
    limit: int | None = Field(
        None, ge=1, description="How many lines to read (default and maximum: the read limit)."
    )


class WriteArgs(BaseModel):
    file_path: _PathArg = Field(description=f"The file to write. {_PATH}")
    content: str = Field(description="The whole new content of the file.")


class EditArgs(BaseModel):
    file_path: _PathArg = Field(description=f"The file to change. {_PATH}")
    old_string: str = Field(min_length=1, description="The exact text to replace.")
    new_string: str = Field(description="The text to put in its place (empty deletes it).")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


class GlobArgs(BaseModel):
    pattern: _PathArg = Field(
        description='The glob pattern, for example "**/*.py" or "src/*.{ts,tsx}".'
    )
    path: _PathArg | None = Field(
        None,
        description="The directory the pattern is relative to (default: the working directory).",
    )


class GrepArgs(BaseModel):
    pattern: str = Field(description="The regular expression to search for (Python syntax).")
    path: _PathArg | None = Field(
        None, description="The directory or file to search (default: the working directory)."
    )
    glob: _PathArg | None = Field(
        None,
        description='Search only files matching this glob ("*.py"; with a "/", it matches the '
        "path relative to path).",
    )
    case_insensitive: bool = Field(False, description="Ignore case when matching.")


def descriptions(config: ToolFsConfig) -> dict[str, str]:
    """Each tool's description, with the configured limits."""
    return {
        "read": (
            "Read a text file. The reply holds its lines numbered from 1 (`N: text`) inside "
            "<content>, and a footer saying that the file ends there or which offset "
            f"continues it. One call returns at most {config.read_limit} lines and "
            f"{config.read_max_bytes} bytes; lines over {config.read_max_line_length} "
            "characters are cut."
        ),
        "write": (
            "Write a whole file: create it (with any missing parent directories) or replace "
            "it. Replacing needs a read of the file in this session first, and fails if the "
            "file changed since. To change part of a file, use edit."
        ),
        "edit": (
            "Replace text in a file: old_string must occur exactly once, or set replace_all "
            "to replace every occurrence. Read the file first and copy old_string from it "
            "exactly, without the `N: ` prefixes of read. The file keeps its line endings."
        ),
        "glob": (
            "List the files whose path, relative to path, matches a glob pattern: * and ? "
            "stay inside one directory, ** matches any number of directories, {a,b} matches "
            f"either. At most {GLOB_LIMIT} files, newest first; .git is skipped."
        ),
        "grep": (
            "Search the contents of files for a regular expression, line by line. Files "
            "excluded by .gitignore, .git and binary files are skipped. The reply starts "
            f"with `Found N matches` and shows the first {GREP_LIMIT} as `path:line: text`."
        ),
    }


SECTIONS = (
    PromptSection(
        name="tool:read",
        order=100,
        text="Read files with read rather than cat, head or tail in a shell; page through "
        "a long file with offset and limit instead of reading it all.",
    ),
    PromptSection(
        name="tool:write",
        order=101,
        text="Use write for new files and whole rewrites only, and read an existing file "
        "before replacing it.",
    ),
    PromptSection(
        name="tool:edit",
        order=102,
        text="Prefer edit for changes to existing files. When old_string matches more "
        "than once, add surrounding lines to make it unique, or set replace_all when "
        "every occurrence should change.",
    ),
    PromptSection(
        name="tool:glob",
        order=103,
        text="Find files by name with glob rather than find or ls in a shell.",
    ),
    PromptSection(
        name="tool:grep",
        order=104,
        text="Search file contents with grep rather than grep or rg in a shell.",
    ),
)
