"""How a bash result reads for the model."""

from __future__ import annotations

from dsh_bash import BashResult, join_parts

__all__ = ["render_result"]


def render_result(result: BashResult) -> str:
    """The tool's text for ``result``: stdout, a truncation marker, ``[stderr]`` and its
    text, ``(no output)`` when both streams are empty, then the timeout marker and the
    signal or non-zero exit code."""
    out, err = result.stdout, result.stderr
    parts: list[str] = []
    if out.text:
        parts.append(out.text)
    if out.truncated:
        parts.append(f"[output truncated; full output: {out.spill_path or '(unavailable)'}]")
    if err.text:
        parts.append(f"[stderr]\n{err.text}")
    if err.truncated:
        parts.append(f"[stderr truncated; full stderr: {err.spill_path or '(unavailable)'}]")
    if not out.text and not err.text:
        parts.append("(no output)")
    if result.timed_out:
        parts.append(f"[timed out after {result.timeout_ms}ms]")
    if result.signal is not None:
        parts.append(f"[killed by signal: {result.signal}]")
    elif result.exit_code:
        parts.append(f"[exit code: {result.exit_code}]")
    return join_parts(parts)
