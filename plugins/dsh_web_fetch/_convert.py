"""HTML to Markdown with the html-to-markdown package (the ``web`` extra; RFC 0012)."""

from __future__ import annotations

from collections.abc import Callable

from dsh import PluginLoadError

__all__ = ["Converter", "load_converter"]

#: ``convert(html, base_url) -> markdown``; relative links resolve against ``base_url``.
Converter = Callable[[str, str], str]


def load_converter() -> Converter:
    """The converter, or :class:`dsh.PluginLoadError` naming the extra to install when
    html-to-markdown is missing.

    The Markdown is GitHub-flavoured: ATX headings, ``-`` bullets, fenced code,
    pipe tables, inline links; ``script``, ``style`` and ``noscript`` are dropped. A
    page nested deeper than the library walks (1024 levels), or one it fails on, is
    passed on as the HTML it was rather than with parts silently missing.
    """
    try:
        import html_to_markdown
    except ImportError as exc:
        raise PluginLoadError(
            "web-fetch turns HTML into Markdown with the html-to-markdown package, which "
            "is not installed: pip install 'dsh-harness[web]'"
        ) from exc

    depth_limit = html_to_markdown.WarningKind.DEPTH_LIMIT_EXCEEDED

    def convert(html: str, base_url: str) -> str:
        options = html_to_markdown.ConversionOptions(
            extract_metadata=False, bullets="-", base_url=base_url
        )
        try:
            result = html_to_markdown.convert(html, options)
        except html_to_markdown.ConversionError:
            return html
        if any(warning.kind == depth_limit for warning in result.warnings):
            return html
        return result.content or ""

    return convert
