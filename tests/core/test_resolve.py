"""Resolving deployment names: files, installed entry points and importable modules."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from dsh import _resolve
from dsh._errors import PluginLoadError
from dsh._resolve import ENTRY_POINT_GROUP, installed_plugins, resolve_plugin

Make = Callable[[str, str], Path]


@pytest.fixture(autouse=True)
def _forget_test_modules(tmp_path: Path) -> Iterator[None]:
    """Drop the modules a test imported from its own files, so none leaks into the next."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        origin = str(getattr(sys.modules[name], "__file__", None) or "")
        if name.startswith("_dsh_file_") or origin.startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> dict[str, importlib.metadata.EntryPoint]:
    """The entry points resolve_plugin sees; empty unless a test adds some."""
    plugins: dict[str, importlib.metadata.EntryPoint] = {}
    monkeypatch.setattr(_resolve, "installed_plugins", lambda: dict(plugins))
    return plugins


def add_entry_point(
    plugins: dict[str, importlib.metadata.EntryPoint], name: str, value: str
) -> None:
    plugins[name] = importlib.metadata.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


@pytest.fixture
def lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Make:
    """Write importable modules into a directory on ``sys.path``."""
    root = tmp_path / "lib"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))

    def make(relative: str, source: str) -> Path:
        path = write_file(root / relative, source)
        importlib.invalidate_caches()
        return path

    return make


@pytest.fixture
def deploy_dir(tmp_path: Path) -> Path:
    """The directory a deployment file would live in."""
    path = tmp_path / "deploy"
    path.mkdir()
    return path


def write_file(path: Path, source: str) -> Path:
    """Write ``source`` (dedented) to ``path``, making its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def load_error(name: str, base_dir: Path) -> PluginLoadError:
    with pytest.raises(PluginLoadError) as info:
        resolve_plugin(name, base_dir)
    return info.value


# -- installed_plugins --------------------------------------------------------------------


def test_installed_plugins_reads_the_entry_point_group(monkeypatch: pytest.MonkeyPatch) -> None:
    web = importlib.metadata.EntryPoint(name="tool-web", value="m:W", group=ENTRY_POINT_GROUP)
    groups: list[str] = []

    def entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
        groups.append(group)
        return [web]

    monkeypatch.setattr(_resolve, "entry_points", entry_points)
    assert installed_plugins() == {"tool-web": web}
    assert groups == ["dsh.plugins"]


def test_installed_plugins_without_patching_returns_entry_points() -> None:
    found = installed_plugins()
    assert all(ep.group == ENTRY_POINT_GROUP and ep.name == name for name, ep in found.items())


# -- files ----------------------------------------------------------------------------------


def test_file_with_plugin_attribute(deploy_dir: Path, installed: object) -> None:
    write_file(deploy_dir / "local.py", "class Local: ...\nplugin = Local\n")
    obj, default = resolve_plugin("./local.py", deploy_dir)
    assert isinstance(obj, type)
    assert obj.__name__ == "Local"
    assert default == "local"


def test_file_with_attribute(deploy_dir: Path) -> None:
    write_file(deploy_dir / "local.py", "class Local: ...\nclass Other: ...\n")
    obj, default = resolve_plugin("./local.py:Other", deploy_dir)
    assert getattr(obj, "__name__", None) == "Other"
    assert default == "Other"


def test_file_with_module_level_apply_is_the_module(deploy_dir: Path) -> None:
    write_file(deploy_dir / "fn.py", "def apply(ctx, config):\n    return None\n")
    obj, default = resolve_plugin("./fn.py", deploy_dir)
    assert isinstance(obj, ModuleType)
    assert callable(obj.apply)
    assert default == "fn"


@pytest.mark.parametrize(
    "name",
    ["plugins/p.py", "plugins/p.py:Thing", "../deploy/plugins/p.py"],
)
def test_file_names_are_relative_to_the_base_dir(deploy_dir: Path, name: str) -> None:
    write_file(deploy_dir / "plugins" / "p.py", "class Thing: ...\nplugin = Thing\n")
    obj, _ = resolve_plugin(name, deploy_dir)
    assert getattr(obj, "__name__", None) == "Thing"


def test_absolute_file_name(tmp_path: Path, deploy_dir: Path) -> None:
    path = write_file(tmp_path / "elsewhere" / "abs.py", "plugin = 'absolute'\n")
    assert resolve_plugin(str(path), deploy_dir) == ("absolute", "abs")
    assert resolve_plugin(f"{path}:plugin", deploy_dir) == ("absolute", "plugin")


def test_same_file_is_imported_once_under_a_stable_name(tmp_path: Path, deploy_dir: Path) -> None:
    write_file(deploy_dir / "once.py", "plugin = []\n")
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    first, _ = resolve_plugin("./once.py", deploy_dir)
    second, _ = resolve_plugin("../deploy/once.py", other_dir)
    assert first is second
    [name] = [n for n, m in list(sys.modules.items()) if getattr(m, "plugin", None) is first]
    assert name.startswith("_dsh_file_once_")
    assert sys.modules[name].__file__ == str((deploy_dir / "once.py").resolve())


def test_files_with_the_same_name_do_not_collide(tmp_path: Path) -> None:
    write_file(tmp_path / "a" / "plugin.py", "plugin = 'a'\n")
    write_file(tmp_path / "b" / "plugin.py", "plugin = 'b'\n")
    assert resolve_plugin("./plugin.py", tmp_path / "a") == ("a", "plugin")
    assert resolve_plugin("./plugin.py", tmp_path / "b") == ("b", "plugin")


def test_a_file_name_with_odd_characters(deploy_dir: Path) -> None:
    write_file(deploy_dir / "my-plugin.v2.py", "plugin = 'odd'\n")
    assert resolve_plugin("./my-plugin.v2.py", deploy_dir) == ("odd", "my-plugin.v2")
    [name] = [n for n, m in list(sys.modules.items()) if getattr(m, "plugin", None) == "odd"]
    assert name.startswith("_dsh_file_my_plugin_v2_")


def test_package_directory_with_relative_imports(deploy_dir: Path) -> None:
    write_file(deploy_dir / "pkg" / "__init__.py", "from .impl import Impl\nplugin = Impl\n")
    write_file(deploy_dir / "pkg" / "impl.py", "class Impl: ...\n")
    obj, default = resolve_plugin("./pkg", deploy_dir)
    assert getattr(obj, "__name__", None) == "Impl"
    assert default == "pkg"
    obj, default = resolve_plugin("./pkg:Impl", deploy_dir)
    assert (getattr(obj, "__name__", None), default) == ("Impl", "Impl")


def test_missing_file_names_the_absolute_path(deploy_dir: Path) -> None:
    error = load_error("./nope.py", deploy_dir)
    assert str(error) == (
        f'cannot find plugin "./nope.py": {(deploy_dir / "nope.py").resolve()} does not exist'
    )


def test_directory_without_init(deploy_dir: Path) -> None:
    (deploy_dir / "bare").mkdir()
    error = load_error("./bare", deploy_dir)
    expected = (deploy_dir / "bare" / "__init__.py").resolve()
    assert str(error) == f'cannot find plugin "./bare": {expected} does not exist'


def test_a_file_that_is_not_python(deploy_dir: Path) -> None:
    source = write_file(deploy_dir / "notes.txt", "plugin = 1\n").resolve()
    error = load_error("./notes.txt", deploy_dir)
    assert str(error) == f'cannot import plugin "./notes.txt": {source} is not a Python file'


def test_a_file_failing_to_import_is_reported_and_not_kept(deploy_dir: Path) -> None:
    path = write_file(deploy_dir / "broken.py", "raise ValueError('bad config table')\n")
    error = load_error("./broken.py", deploy_dir)
    assert str(error) == (
        'cannot import plugin "./broken.py": ValueError: bad config table '
        f"(at {deploy_dir / 'broken.py'}:1)"
    )
    assert isinstance(error.__cause__, ValueError)
    assert not [n for n in sys.modules if n.startswith("_dsh_file_broken_")]
    # Fixing the file and resolving again imports it afresh.
    write_file(path, "plugin = 'fixed'\n")
    assert resolve_plugin("./broken.py", deploy_dir) == ("fixed", "broken")


def test_a_file_with_a_syntax_error(deploy_dir: Path) -> None:
    write_file(deploy_dir / "syntax.py", "def (:\n")
    error = load_error("./syntax.py", deploy_dir)
    assert str(error).startswith('cannot import plugin "./syntax.py": SyntaxError: ')
    assert isinstance(error.__cause__, SyntaxError)


def test_a_missing_attribute_in_a_file(deploy_dir: Path) -> None:
    write_file(deploy_dir / "attrs.py", "class Plugin: ...\n")
    error = load_error("./attrs.py:Plugn", deploy_dir)
    assert str(error) == (
        'cannot load plugin "./attrs.py:Plugn": "./attrs.py" has no attribute "Plugn"; '
        "did you mean: Plugin?"
    )
    assert error.__cause__ is None


@pytest.mark.parametrize("name", ["./attrs.py:", "./attrs.py:1st", "./attrs.py:a b"])
def test_an_invalid_attribute_in_a_file_name(deploy_dir: Path, name: str) -> None:
    write_file(deploy_dir / "attrs.py", "x = 1\n")
    attr = name.partition(":")[2]
    assert str(load_error(name, deploy_dir)) == (
        f'invalid plugin name "{name}": "{attr}" is not an attribute name'
    )
    assert not [n for n in sys.modules if n.startswith("_dsh_file_attrs_")]


# -- installed entry points -----------------------------------------------------------------


def test_entry_point_to_an_attribute(
    lib: Make, installed: dict[str, importlib.metadata.EntryPoint], deploy_dir: Path
) -> None:
    lib("ep_attr_mod.py", "class Web: ...\n")
    add_entry_point(installed, "tool-web", "ep_attr_mod:Web")
    obj, default = resolve_plugin("tool-web", deploy_dir)
    assert getattr(obj, "__name__", None) == "Web"
    assert default == "tool-web"


@pytest.mark.parametrize(
    "case",
    [("web", "ep_module_mod", "the plugin"), ("json", "ep_target", "target")],
    ids=["a module with plugin", "wins over a module of the same name"],
)
def test_entry_point_to_a_module_with_plugin(
    lib: Make,
    installed: dict[str, importlib.metadata.EntryPoint],
    deploy_dir: Path,
    case: tuple[str, str, str],
) -> None:
    name, module, plugin = case
    lib(f"{module}.py", f"plugin = {plugin!r}\n")
    add_entry_point(installed, name, module)
    assert resolve_plugin(name, deploy_dir) == (plugin, name)


def test_entry_point_to_a_missing_module(
    installed: dict[str, importlib.metadata.EntryPoint], deploy_dir: Path
) -> None:
    add_entry_point(installed, "ghost", "dsh_no_such_module_xyz:Ghost")
    error = load_error("ghost", deploy_dir)
    assert str(error) == (
        'cannot import plugin "ghost": '
        "ModuleNotFoundError: No module named 'dsh_no_such_module_xyz'"
    )
    assert isinstance(error.__cause__, ModuleNotFoundError)


def test_entry_point_to_a_missing_attribute(
    lib: Make, installed: dict[str, importlib.metadata.EntryPoint], deploy_dir: Path
) -> None:
    lib("ep_missing_attr.py", "x = 1\n")
    add_entry_point(installed, "tool", "ep_missing_attr:Tool")
    assert str(load_error("tool", deploy_dir)) == (
        'cannot load plugin "tool": "ep_missing_attr" has no attribute "Tool"'
    )


def test_malformed_entry_point(
    installed: dict[str, importlib.metadata.EntryPoint], deploy_dir: Path
) -> None:
    add_entry_point(installed, "broken", "not a valid value!")
    assert str(load_error("broken", deploy_dir)) == (
        "cannot load plugin \"broken\": malformed entry point value 'not a valid value!'"
    )


# -- modules --------------------------------------------------------------------------------


def test_module_with_plugin_attribute(lib: Make, installed: object, deploy_dir: Path) -> None:
    lib("mod_plain.py", "plugin = 'plain plugin'\nOther = 'other'\n")
    assert resolve_plugin("mod_plain", deploy_dir) == ("plain plugin", "mod_plain")
    assert resolve_plugin("mod_plain:Other", deploy_dir) == ("other", "Other")


def test_module_with_apply_is_the_module(lib: Make, installed: object, deploy_dir: Path) -> None:
    lib("mod_apply.py", "def apply(ctx):\n    pass\n")
    obj, default = resolve_plugin("mod_apply", deploy_dir)
    assert isinstance(obj, ModuleType)
    assert obj.__name__ == "mod_apply"
    assert default == "mod_apply"


def test_dotted_module_and_attribute(lib: Make, installed: object, deploy_dir: Path) -> None:
    lib("mod_pkg/__init__.py", "")
    lib("mod_pkg/sub.py", "class Outer:\n    class Inner: ...\n")
    obj, default = resolve_plugin("mod_pkg.sub:Outer.Inner", deploy_dir)
    assert getattr(obj, "__qualname__", None) == "Outer.Inner"
    assert default == "Inner"
    obj, default = resolve_plugin("mod_pkg.sub", deploy_dir)
    assert (getattr(obj, "__name__", None), default) == ("mod_pkg.sub", "mod_pkg.sub")


def test_attribute_resolving_to_a_module_with_plugin(
    lib: Make, installed: object, deploy_dir: Path
) -> None:
    lib("mod_outer/__init__.py", "from . import inner\n")
    lib("mod_outer/inner.py", "plugin = 'inner plugin'\n")
    assert resolve_plugin("mod_outer:inner", deploy_dir) == ("inner plugin", "inner")


def test_missing_nested_attribute(lib: Make, installed: object, deploy_dir: Path) -> None:
    lib("mod_nested.py", "class Outer:\n    inner = 1\n")
    assert str(load_error("mod_nested:Outer.innr", deploy_dir)) == (
        'cannot load plugin "mod_nested:Outer.innr": "mod_nested" has no attribute '
        '"Outer.innr"; did you mean: inner?'
    )


def test_invalid_attribute_in_a_module_name(installed: object, deploy_dir: Path) -> None:
    assert str(load_error("json:", deploy_dir)) == (
        'invalid plugin name "json:": "" is not an attribute name'
    )


def test_module_failing_to_import(lib: Make, installed: object, deploy_dir: Path) -> None:
    lib("mod_boom.py", "raise RuntimeError('boom')\n")
    error = load_error("mod_boom", deploy_dir)
    assert str(error).startswith('cannot import plugin "mod_boom": RuntimeError: boom (at ')
    assert str(error).endswith("mod_boom.py:1)")  # the plugin's own file and line
    assert isinstance(error.__cause__, RuntimeError)


def test_module_with_a_missing_dependency(lib: Make, installed: object, deploy_dir: Path) -> None:
    lib("mod_needs_dep.py", "import dsh_missing_dependency_xyz\n")
    error = load_error("mod_needs_dep:Thing", deploy_dir)
    assert str(error).startswith(
        'cannot import plugin "mod_needs_dep:Thing": '
        "ModuleNotFoundError: No module named 'dsh_missing_dependency_xyz' (at "
    )
    assert str(error).endswith("mod_needs_dep.py:1)")
    assert isinstance(error.__cause__, ModuleNotFoundError)


def test_missing_submodule_of_an_existing_package(
    lib: Make, installed: dict[str, importlib.metadata.EntryPoint], deploy_dir: Path
) -> None:
    lib("mod_parent/__init__.py", "")
    error = load_error("mod_parent.child", deploy_dir)
    assert str(error) == 'unknown plugin "mod_parent.child"'
    assert error.__cause__ is None
    assert error.__suppress_context__


# -- unknown names ----------------------------------------------------------------------------


def test_unknown_name_suggests_close_matches(
    installed: dict[str, importlib.metadata.EntryPoint], deploy_dir: Path
) -> None:
    for name in ("system-prompt", "system-prompts", "tool-web", "agent-core"):
        add_entry_point(installed, name, "dsh_never_imported_xyz")
    assert str(load_error("sytem-prompt", deploy_dir)) == (
        'unknown plugin "sytem-prompt"; did you mean: system-prompt, system-prompts?'
    )


def test_unknown_name_lists_installed_plugins(
    installed: dict[str, importlib.metadata.EntryPoint], deploy_dir: Path
) -> None:
    add_entry_point(installed, "tool-web", "x")
    add_entry_point(installed, "agent-core", "x")
    assert str(load_error("dsh_no_such_module_xyz.sub:Attr", deploy_dir)) == (
        'unknown plugin "dsh_no_such_module_xyz.sub:Attr"; installed plugins: agent-core, tool-web'
    )


def test_unknown_name_with_nothing_installed(installed: object, deploy_dir: Path) -> None:
    error = load_error("llm-openai", deploy_dir)
    assert str(error) == 'unknown plugin "llm-openai"'
    assert isinstance(error, ImportError)
    assert error.code == "PLUGIN_LOAD"


@pytest.mark.parametrize("name", ["", "   "])
def test_empty_name(deploy_dir: Path, name: str) -> None:
    assert str(load_error(name, deploy_dir)) == "a plugin name must not be empty"
