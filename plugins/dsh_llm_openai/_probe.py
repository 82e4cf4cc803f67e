"""Asking an OpenAI-compatible server for a model's context window.

Three servers say it, each in its own way: vLLM in ``GET <base_url>/models``
(``max_model_len`` of the model), llama.cpp's server in ``GET <root>/props``
(``default_generation_settings.n_ctx``) and Ollama in ``POST <root>/api/show``
(``model_info["<architecture>.context_length"]``), where ``<root>`` is ``base_url``
without its ``/v1``. They are asked in that order until one answers; a server that
cannot be reached is not asked further. Nothing here raises: a failed probe is a
DEBUG line on the adapter's logger and an answer of None.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx

__all__ = ["probe_window"]

#: Where each probe reads the window in the server's JSON answer.
_Reader = Callable[[Any, str], object]


def _vllm(data: Any, model: str) -> object:
    for entry in data.get("data") or ():
        if isinstance(entry, dict) and entry.get("id") == model:
            return entry.get("max_model_len")
    return None


def _llama_cpp(data: Any, model: str) -> object:
    settings = data.get("default_generation_settings")
    return settings.get("n_ctx") if isinstance(settings, dict) else None


def _ollama(data: Any, model: str) -> object:
    info = data.get("model_info")
    if not isinstance(info, dict):
        return None
    return next((v for k, v in info.items() if k.endswith(".context_length")), None)


def _root(base_url: str) -> str:
    return base_url.removesuffix("/v1")


async def probe_window(
    client: httpx.AsyncClient,
    base_url: str,
    model: str,
    *,
    headers: Mapping[str, str],
    patience: float,
    log: logging.Logger,
) -> int | None:
    """The context window of ``model`` as the server at ``base_url`` states it, or None
    (``patience``: the seconds each probe may take, from connecting to the last byte)."""
    root = _root(base_url)
    probes: list[tuple[str, str, dict[str, Any] | None, _Reader]] = [
        ("GET", f"{base_url}/models", None, _vllm),
        ("GET", f"{root}/props", None, _llama_cpp),
        ("POST", f"{root}/api/show", {"model": model}, _ollama),
    ]
    for method, url, body, read in probes:
        try:
            response = await client.request(
                method, url, json=body, headers=headers, timeout=patience
            )
        except httpx.HTTPError as exc:
            log.debug("context window of %r: %s %s failed: %s", model, method, url, exc)
            return None  # not reachable: the other probes would not reach it either
        try:
            data = response.json() if response.is_success else None
        except ValueError:
            data = None
        window = read(data, model) if isinstance(data, dict) else None
        if type(window) is int and window > 0:
            log.debug("context window of %r: %d tokens (%s %s)", model, window, method, url)
            return window
        log.debug(
            "context window of %r: %s %s answered HTTP %d without one",
            model,
            method,
            url,
            response.status_code,
        )
    return None
