"""What the fs tools send back to the model: pages, edits, listings and matches."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from operator import add

from dsh_fs import FileText, FsNotFoundError, Listing, SearchResult

from ._errors import FsAmbiguousEditError, FsEditNotFoundError

__all__ = [
    "GLOB_LIMIT",
    "GREP_LIMIT",
    "apply_edit",
    "cut_line",
    "render_glob",
    "render_grep",
    "render_page",
    "render_write",
]

#: The most files ``glob`` lists and matches ``grep`` shows.
GLOB_LIMIT = 100
GREP_LIMIT = 250


def _envelope(path: str, body: str) -> str:
    return f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n</content>"


def cut_line(line: str, limit: int) -> str:
    """``line``, or its first ``limit`` characters and a marker."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... (line truncated to {limit} chars)"


def render_page(
    file: FileText, offset: int, limit: int, max_line_length: int, max_bytes: int
) -> str:
    """The ``read`` envelope for lines ``offset``.. of ``file`` (at most ``limit`` lines
    and ``max_bytes`` bytes of numbered lines, at least one line).

    Raises ``FsNotFoundError`` when ``offset`` is past the last line (offset 1 of an
    empty file is the empty page)."""
    text = file.text.replace("\r\n", "\n") if "\r" in file.text else file.text
    lines = text.split("\n") if text else []
    if text.endswith("\n"):
        lines.pop()
    total = len(lines)
    if offset > max(total, 1):
        raise FsNotFoundError(
            f'offset {offset} is out of range for "{file.path}" ({total} lines)', file.path
        )
    page = lines[offset - 1 : offset - 1 + limit]
    ascii_only = text.isascii()
    widths = list(map(len, page)) if ascii_only else [len(line.encode()) for line in page]
    if page and max(widths) > max_line_length:
        page = [cut_line(line, max_line_length) for line in page]
        widths = list(map(len, page)) if ascii_only else [len(line.encode()) for line in page]
    prefixes = _prefixes(offset, len(page))
    shown = len(page)
    # Each numbered line costs a line break, "N: " and its text (prefixes hold the
    # break: "\nN: ").
    if sum(widths) + _prefix_bytes(offset, shown) > max_bytes:
        sizes = list(accumulate(map(add, widths, map(len, prefixes))))
        fits = bisect_right(range(shown), max_bytes, key=sizes.__getitem__)
        shown = max(fits, 1)
    last = offset + shown - 1
    if shown < len(page):
        footer = (
            f"(Output capped. Showing lines {offset}-{last}. Use offset={last + 1} to continue.)"
        )
    elif last < total:
        footer = f"(Showing lines {offset}-{last} of {total}. Use offset={last + 1} to continue.)"
    else:
        footer = f"(End of file - total {total} lines)"
    # Interleave prefixes and lines by slice assignment: no string is made per line.
    parts = [""] * (2 * shown)
    parts[0::2] = prefixes[:shown]
    parts[1::2] = page[:shown]
    body = "".join(parts)
    return _envelope(file.path, f"{body[1:]}\n\n{footer}" if shown else f"\n{footer}")


#: How many ``"\\nN: "`` prefixes are kept (a page is then a slice of them).
PREFIXES_KEPT = 1 << 16
_PREFIXES: list[str] = []


def _prefixes(first: int, count: int) -> list[str]:
    """The ``"\\nN: "`` prefixes of lines ``first`` .. ``first + count - 1``."""
    end = first + count
    if len(_PREFIXES) < end <= PREFIXES_KEPT:
        _PREFIXES.extend(f"\n{n}: " for n in range(len(_PREFIXES), end))
    if end <= len(_PREFIXES):
        return _PREFIXES[first:end]
    return [f"\n{n}: " for n in range(first, end)]


def _prefix_bytes(first: int, count: int) -> int:
    """The total length of the prefixes of lines ``first`` .. ``first + count - 1``."""
    total, low, end = 0, first, first + count
    while low < end:
        width = len(str(low))
        high = min(end, 10**width)
        total += (high - low) * (width + 3)
        low = high
    return total


def render_write(path: str, created: bool) -> str:
    """The ``write`` envelope."""
    return _envelope(path, "Created file" if created else "Updated file")


def apply_edit(text: str, old: str, new: str, replace_all: bool, path: str) -> str:
    """``text`` with ``old`` replaced by ``new``, matched on LF-normalised text and
    written back with the dominant line ending of ``text`` (CRLF when it has more CRLF
    than bare LF breaks)."""
    crlf = text.count("\r\n")
    normalised = text.replace("\r\n", "\n") if crlf else text
    old = old.replace("\r\n", "\n")
    new = new.replace("\r\n", "\n")
    count = normalised.count(old)
    if not count:
        raise FsEditNotFoundError(
            f'old_string was not found in "{path}" — copy it exactly from the file as it is '
            "now (without the line-number prefixes of read)",
            path,
        )
    if count > 1 and not replace_all:
        raise FsAmbiguousEditError(
            f'old_string matched {count} times in "{path}"; provide a more specific '
            "old_string or set replace_all to true",
            path,
        )
    result = normalised.replace(old, new) if replace_all else normalised.replace(old, new, 1)
    return result.replace("\n", "\r\n") if crlf > text.count("\n") - crlf else result


def render_glob(listing: Listing) -> str:
    """The ``glob`` reply: one path per line, newest first."""
    if not listing.files:
        return "No files found"
    text = "\n".join(listing.files)
    if listing.total > len(listing.files):
        text += (
            f"\n\n(Showing the {len(listing.files)} newest of {listing.total} files. Use a "
            "more specific pattern or path to see the rest.)"
        )
    return text


def render_grep(result: SearchResult, max_line_length: int) -> str:
    """The ``grep`` reply: ``Found N matches``, then ``<path>:<line>: <text>`` lines."""
    if not result.total:
        return "No matches found"
    noun = "match" if result.total == 1 else "matches"
    lines = [f"Found {result.total} {noun}"]
    lines.extend(f"{m.path}:{m.line}: {cut_line(m.text, max_line_length)}" for m in result.matches)
    text = "\n".join(lines)
    if result.total > len(result.matches):
        text += (
            f"\n\n(Showing the first {len(result.matches)} of {result.total} matches. Use a "
            "more specific pattern, path or glob to see the rest.)"
        )
    return text
