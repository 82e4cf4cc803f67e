"""Turning a deployment or entry-point ``name`` into a plugin object.

A name is, in this order of precedence:

* a file: ``./x.py``, ``../x.py``, ``dir/x.py`` or ``/abs/x.py``, optionally with
  ``:attr``, relative to the deployment's directory. A directory holding ``__init__.py``
  (``./pkg``) is imported as a package, so its modules can use relative imports;
* an installed entry point of the ``dsh.plugins`` group (``system-prompt``);
* an importable ``module`` or ``module:attr``.

A module stands for, in this order: its ``plugin`` attribute; itself, when it has a
module-level ``apply`` (with ``Config``, ``inject``, ``name``); the one ``dsh.Plugin``
subclass it defines (several are an error naming them: pick one with ``:Name``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from types import CodeType, ModuleType
from typing import TYPE_CHECKING

from dsh._entry_points import entry_points
from dsh._errors import PluginLoadError
from dsh._plugin import Plugin

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "ENTRY_POINT_GROUP",
    "FILE_MODULE_PREFIX",
    "file_target",
    "forget_modules",
    "installed_plugins",
    "resolve_plugin",
]

ENTRY_POINT_GROUP = "dsh.plugins"
#: How the module of a file plugin is named in ``sys.modules`` (then the file's stem
#: and a digest of its path).
FILE_MODULE_PREFIX = "_dsh_file_"

_FILE_PREFIXES = ("./", "../")
#: Frames of the import machinery are not where a plugin's import failed.
_IMPORTLIB = str(Path(importlib.__file__).parent)
_NOT_IDENTIFIER = re.compile(r"\W")


def installed_plugins() -> dict[str, EntryPoint]:
    """The installed entry points of the ``dsh.plugins`` group, by name (read afresh)."""
    return {ep.name: ep for ep in entry_points(ENTRY_POINT_GROUP)}


def resolve_plugin(name: str, base_dir: Path) -> tuple[object, str]:
    """Import the object ``name`` refers to; return it with its default plugin name.

    ``base_dir`` is the directory file names are relative to (the deployment's). Raises
    :class:`PluginLoadError` for a name that cannot be found or imported.
    """
    if not name.strip():
        raise PluginLoadError("a plugin name must not be empty")
    file_ref = _split_file_ref(name)
    if file_ref is not None:
        path, attr = file_ref
        _check_attr(name, attr)
        module, default = _import_file(name, path, base_dir)
        return _pick(name, module, path, attr), _default_name(attr, default)

    plugins = installed_plugins()
    entry_point = plugins.get(name)
    if entry_point is not None:
        try:
            module_name, attr = entry_point.module, entry_point.attr
        except AttributeError:  # the value does not match ``module[:attr]``
            message = f"malformed entry point value {entry_point.value!r}"
            raise PluginLoadError(f'cannot load plugin "{name}": {message}') from None
        module = _import_module(name, module_name, None)
        return _pick(name, module, module_name, attr), name

    module_name, sep, attr_text = name.partition(":")
    attr = attr_text if sep else None
    if not _is_dotted(module_name):
        raise PluginLoadError(_unknown(name, plugins))
    _check_attr(name, attr)
    module = _import_module(name, module_name, plugins)
    return _pick(name, module, module_name, attr), _default_name(attr, module_name)


def file_target(name: str, base_dir: Path) -> Path | None:
    """The file (or package directory) ``name`` refers to, when it names one."""
    file_ref = _split_file_ref(name)
    return None if file_ref is None else (base_dir / file_ref[0]).resolve()


def forget_modules(paths: Iterable[Path]) -> list[str]:
    """Remove from ``sys.modules`` every module loaded from one of ``paths`` (a file,
    or any file under a directory), with the rest of its top-level package, so the
    next import of any of them runs the code afresh; the names removed, sorted.

    Objects already imported stay usable: whoever holds them keeps them alive.
    """
    roots = {os.path.realpath(path) for path in paths}
    if not roots:
        return []
    under = tuple(root + os.sep for root in roots)
    families = set()
    for name, module in list(sys.modules.items()):
        # Module files are absolute paths (dsh imports file plugins by their real path).
        origin = getattr(module, "__file__", None) or ""
        if origin in roots or origin.startswith(under):
            families.add(name.partition(".")[0])
    gone = sorted(name for name in sys.modules if name.partition(".")[0] in families)
    for name in gone:
        del sys.modules[name]
    return gone


def _split_file_ref(name: str) -> tuple[str, str | None] | None:
    """``(path, attr)`` when ``name`` refers to a file or directory, else None."""
    if name.endswith(".py"):
        return name, None
    path, sep, attr = name.rpartition(":")
    if sep and (path.endswith(".py") or path.startswith(_FILE_PREFIXES)):
        return path, attr
    if name.startswith(_FILE_PREFIXES):
        return name, None
    return None


def _is_dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _check_attr(name: str, attr: str | None) -> None:
    if attr is not None and not _is_dotted(attr):
        raise PluginLoadError(f'invalid plugin name "{name}": "{attr}" is not an attribute name')


def _default_name(attr: str | None, fallback: str) -> str:
    return attr.rpartition(".")[2] if attr else fallback


def _unknown(name: str, plugins: dict[str, EntryPoint]) -> str:
    import difflib  # only an error's message needs it (docs/rfc/0050)

    known = sorted(plugins)
    close = difflib.get_close_matches(name, known)
    if close:
        return f'unknown plugin "{name}"; did you mean: {", ".join(close)}?'
    if known:
        return f'unknown plugin "{name}"; installed plugins: {", ".join(known)}'
    return f'unknown plugin "{name}"'


def _import_failed(name: str, exc: BaseException) -> PluginLoadError:
    where = _raised_at(exc)
    at = f" (at {where})" if where else ""
    return PluginLoadError(f'cannot import plugin "{name}": {type(exc).__name__}: {exc}{at}')


def _raised_at(exc: BaseException) -> str | None:
    """``file:line`` of the plugin code that raised ``exc`` while it was imported: the
    innermost frame outside the import machinery (a syntax error's own location)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith(("<frozen ", _IMPORTLIB)) and frame.filename != __file__
    ]
    if not frames:
        return None
    return f"{frames[-1].filename}:{frames[-1].lineno}"


def _import_module(
    name: str, module_name: str, plugins: dict[str, EntryPoint] | None
) -> ModuleType:
    """Import ``module_name``; a missing module is an unknown plugin when ``plugins`` is given."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if plugins is not None and (module_name + ".").startswith(missing + "."):
            # The module itself (or a parent package) does not exist, as opposed to a
            # dependency of an existing module failing to import.
            raise PluginLoadError(_unknown(name, plugins)) from None
        raise _import_failed(name, exc) from exc
    except Exception as exc:
        raise _import_failed(name, exc) from exc


def _import_file(name: str, path: str, base_dir: Path) -> tuple[ModuleType, str]:
    """Import a plugin file (or package directory) once per absolute path."""
    target = (base_dir / path).resolve()
    if target.is_dir():
        source, search, stem = target / "__init__.py", [str(target)], target.name
    else:
        source, search, stem = target, None, target.stem
    if not source.is_file():
        raise PluginLoadError(f'cannot find plugin "{name}": {source} does not exist')
    # The module name is stable for a path, so every deployment naming this file shares
    # one module, and unique across paths, so two "plugin.py" files never collide.
    digest = hashlib.sha256(str(target).encode()).hexdigest()[:12]
    module_name = f"{FILE_MODULE_PREFIX}{_NOT_IDENTIFIER.sub('_', stem)}_{digest}"
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        return loaded, stem
    loader = _SourceLoader(module_name, str(source)) if source.suffix == ".py" else None
    spec = importlib.util.spec_from_file_location(
        module_name, source, loader=loader, submodule_search_locations=search
    )
    if spec is None or spec.loader is None:
        raise PluginLoadError(f'cannot import plugin "{name}": {source} is not a Python file')
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise _import_failed(name, exc) from exc
    return module, stem


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles a plugin file from its source every time: a cached ``.pyc`` is
    trusted by the file's mtime in whole seconds and its size, so an edit that keeps
    the size within a second would import the previous code (hot reload edits files
    that fast). Nothing is written next to the plugin either."""

    def get_code(self, fullname: str) -> CodeType:
        return self.source_to_code(self.get_data(self.path), self.path)


def _pick(name: str, module: ModuleType, display: str, attr: str | None) -> object:
    """Follow ``attr`` from ``module``; a module with a ``plugin`` stands for that object."""
    obj: object = module
    if attr is not None:
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                import difflib  # only an error's message needs it (docs/rfc/0050)

                message = f'cannot load plugin "{name}": "{display}" has no attribute "{attr}"'
                close = difflib.get_close_matches(
                    part, [n for n in dir(obj) if not n.startswith("_")]
                )
                if close:
                    message += f"; did you mean: {', '.join(close)}?"
                raise PluginLoadError(message) from None
    if isinstance(obj, ModuleType):
        if hasattr(obj, "plugin"):
            return obj.plugin
        if not callable(getattr(obj, "apply", None)):
            return _only_plugin_class(name, obj)
    return obj


def _only_plugin_class(name: str, module: ModuleType) -> object:
    """The one ``dsh.Plugin`` subclass a module defines (a module with neither
    ``plugin`` nor ``apply``); the module itself when it defines none."""
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Plugin)
        and value.__module__ == module.__name__
    ]
    if len(found) > 1:
        names = ", ".join(cls.__name__ for cls in found)
        raise PluginLoadError(
            f'cannot load plugin "{name}": it defines several plugin classes ({names}); '
            f'name one ("{name}:{found[0].__name__}"), or set plugin = <the class>'
        )
    return found[0] if found else module
