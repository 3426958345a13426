"""Every test can fail: read from the source (no test runs here), each test function of tests/
(a ``def test_*`` or ``async def test_*``, at module level or in a ``Test*`` class) has an
``assert`` statement, uses ``pytest.raises``, ``pytest.warns``, ``pytest.deprecated_call`` or
``pytest.fail``, or calls a checker.

A checker is a function of tests/ (in the test's module, or imported from another module of
tests/: ``from tests.x import f``, ``from .x import f``, ``from . import x`` then ``x.f()``, a
worker's sibling module imported by its bare name) whose body does one of those, raises, or
calls a checker in turn. An import is read for its whole module, wherever it stands.
tests/accmt/accmt_1x_tests, accmt 1.9.5.1's own tests vendored as they shipped, is left out."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
VENDORED = TESTS / "accmt" / "accmt_1x_tests"
# What fails a test from pytest's own API.
PYTEST_FAILS = {"raises", "warns", "deprecated_call", "fail"}

Key = tuple[Path, str]  # a function: its module's file and its qualified name there


@dataclass
class Function:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    fails: bool  # asserts, or fails through pytest's API
    raises: bool  # has a raise statement
    calls: list[Key] = field(default_factory=list)


@dataclass
class Module:
    path: Path
    functions: dict[str, Function] = field(default_factory=dict)
    names: dict[str, Key] = field(default_factory=dict)  # imported functions, by local name
    modules: dict[str, Path] = field(default_factory=dict)  # imported modules, by local name
    pytest_names: set[str] = field(default_factory=set)  # the module's names for pytest
    pytest_fails: set[str] = field(default_factory=set)  # e.g. ``raises`` from pytest


def module_file(name: str, root: Path, importer: Path | None = None) -> Path | None:
    """The file of the dotted module ``name`` below ``root``, if it is one of the repository's;
    given the ``importer``'s file, a bare name may also be a module beside it (a worker script
    imports its sibling so: the script's folder is first on sys.path)."""
    base = root.joinpath(*name.split(".")) if name else root
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    if importer is not None and name and "." not in name:
        sibling = importer.parent / f"{name}.py"
        return sibling if sibling.is_file() else None
    return None


def imported_from(node: ast.ImportFrom, path: Path, root: Path) -> str | None:
    """The dotted name (below ``root``) of the module a ``from ... import`` reads from."""
    if node.level == 0:
        return node.module
    package = path.parent.relative_to(root).parts
    if node.level > 1:
        package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def _read_imports(module: Module, tree: ast.Module, root: Path) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "pytest":
                    module.pytest_names.add(alias.asname or "pytest")
                elif alias.asname and (target := module_file(alias.name, root, module.path)):
                    module.modules[alias.asname] = target
        elif isinstance(node, ast.ImportFrom):
            if node.module == "pytest" and node.level == 0:
                module.pytest_fails |= {
                    alias.asname or alias.name for alias in node.names if alias.name in PYTEST_FAILS
                }
                continue
            source = imported_from(node, module.path, root)
            if source is None:
                continue
            source_file = module_file(source, root, module.path if node.level == 0 else None)
            for alias in node.names:
                local = alias.asname or alias.name
                submodule = module_file(f"{source}.{alias.name}" if source else alias.name, root)
                if submodule is not None:
                    module.modules[local] = submodule
                elif source_file is not None:
                    module.names[local] = (source_file, alias.name)


def _fails_through_pytest(node: ast.AST, module: Module) -> bool:
    if isinstance(node, ast.Attribute) and node.attr in PYTEST_FAILS:
        return isinstance(node.value, ast.Name) and node.value.id in module.pytest_names
    return isinstance(node, ast.Name) and node.id in module.pytest_fails


def _callee(call: ast.Call, module: Module, owner: str | None) -> Key | None:
    """The repository function a call names, where it can be told from the source."""
    func = call.func
    if isinstance(func, ast.Name):
        if func.id in module.functions:
            return (module.path, func.id)
        return module.names.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        base = func.value.id
        if base in module.modules:
            return (module.modules[base], func.attr)
        if base in ("self", "cls") and owner is not None:
            return (module.path, f"{owner}.{func.attr}")
        if f"{base}.{func.attr}" in module.functions:  # a class's static or class method
            return (module.path, f"{base}.{func.attr}")
    return None


def _function(
    node: ast.FunctionDef | ast.AsyncFunctionDef, module: Module, owner: str | None
) -> Function:
    inside = [part for statement in node.body for part in ast.walk(statement)]
    function = Function(
        node,
        fails=any(
            isinstance(part, ast.Assert) or _fails_through_pytest(part, module) for part in inside
        ),
        raises=any(isinstance(part, ast.Raise) for part in inside),
    )
    function.calls = [
        key
        for part in inside
        if isinstance(part, ast.Call) and (key := _callee(part, module, owner)) is not None
    ]
    return function


def read_module(path: Path, root: Path) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = Module(path)
    _read_imports(module, tree, root)
    definitions: list[tuple[str, str | None, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            definitions.append((node.name, None, node))
        elif isinstance(node, ast.ClassDef):
            definitions.extend(
                (f"{node.name}.{item.name}", node.name, item)
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            )
    for name, _, node in definitions:  # every name first: a call may name a later function
        module.functions[name] = Function(node, fails=False, raises=False)
    for name, owner, node in definitions:
        module.functions[name] = _function(node, module, owner)
    return module


def suite_modules(root: Path) -> list[Path]:
    """Every module of ``root``'s tests folder, less the vendored one."""
    vendored = root / VENDORED.relative_to(ROOT)
    return sorted(path for path in (root / "tests").rglob("*.py") if vendored not in path.parents)


def checkers(modules: dict[Path, Module]) -> set[Key]:
    """The functions that can fail, directly or through the functions they call."""
    functions = {
        (path, name): function
        for path, module in modules.items()
        for name, function in module.functions.items()
    }
    found = {key for key, function in functions.items() if function.fails or function.raises}
    while True:
        more = {
            key
            for key, function in functions.items()
            if key not in found and any(callee in found for callee in function.calls)
        }
        if not more:
            return found
        found |= more


def collected(module: Module) -> Iterator[tuple[str, Function]]:
    for name, function in module.functions.items():
        owner, _, own = name.rpartition(".")
        if own.startswith("test") and (not owner or owner.startswith("Test")):
            yield name, function


def cannot_fail(root: Path) -> list[str]:
    """``file:line:name`` of every test function below ``root``/tests that cannot fail."""
    modules = {path: read_module(path, root) for path in suite_modules(root)}
    can_fail = checkers(modules)
    return [
        f"{path.relative_to(root)}:{function.node.lineno}:{name}"
        for path, module in modules.items()
        for name, function in collected(module)
        if not function.fails and not any(callee in can_fail for callee in function.calls)
    ]


def test_every_test_can_fail() -> None:
    assert cannot_fail(ROOT) == []


def test_the_suite_is_read() -> None:
    modules = suite_modules(ROOT)
    assert Path(__file__) in modules
    assert not [path for path in modules if VENDORED in path.parents]
    assert len(modules) > 150


def test_a_test_that_asserts_nothing_is_found(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "sub" / "_helpers.py").write_text(
        "def check(x):\n"
        "    if x != 1:\n"
        "        raise AssertionError(x)\n"
        "\n"
        "def deeper(x):\n"
        "    check(x)\n"
        "\n"
        "def quiet(x):\n"
        "    return x + 1\n",
        encoding="utf-8",
    )
    (tests / "sub" / "test_crafted.py").write_text(
        "import pytest\n"
        "from pytest import raises as expect\n"
        "from ._helpers import deeper, quiet\n"
        "from tests.sub import _helpers as helpers\n"
        "\n"
        "def local(x):\n"
        "    assert x\n"
        "\n"
        "def test_asserts():\n"
        "    assert 1 + 1 == 2\n"
        "\n"
        "def test_runs_but_checks_nothing():\n"
        "    quiet(1)\n"
        "\n"
        "async def test_async_checks_nothing():\n"
        "    quiet(2)\n"
        "\n"
        "def test_raises():\n"
        "    with pytest.raises(ZeroDivisionError):\n"
        "        1 / 0\n"
        "\n"
        "def test_expect():\n"
        "    with expect(ZeroDivisionError):\n"
        "        1 / 0\n"
        "\n"
        "def test_fail():\n"
        "    pytest.fail('never')\n"
        "\n"
        "def test_local_checker():\n"
        "    local(1)\n"
        "\n"
        "def test_imported_checker_two_calls_down():\n"
        "    deeper(1)\n"
        "\n"
        "def test_module_attribute_checker():\n"
        "    helpers.check(1)\n"
        "\n"
        "def test_a_raise_is_no_check_of_a_test_s_own():\n"
        "    raise SystemExit\n"
        "\n"
        "class TestGroup:\n"
        "    def helper(self):\n"
        "        assert True\n"
        "\n"
        "    def test_method_checks_nothing(self):\n"
        "        quiet(3)\n"
        "\n"
        "    def test_method_through_self(self):\n"
        "        self.helper()\n"
        "\n"
        "class Group:\n"
        "    def test_not_collected(self):\n"
        "        quiet(4)\n"
        "\n"
        "def test_sibling_module_by_bare_name():\n"  # as a worker script imports
        "    import _helpers as sibling\n"
        "    sibling.check(1)\n"
        "\n"
        "def test_sibling_function_by_bare_name():\n"
        "    from _helpers import check as bare_check\n"
        "    bare_check(1)\n"
        "\n"
        "def test_sibling_function_that_checks_nothing():\n"
        "    from _helpers import quiet as bare_quiet\n"
        "    bare_quiet(1)\n",
        encoding="utf-8",
    )
    assert cannot_fail(tmp_path) == [
        "tests/sub/test_crafted.py:12:test_runs_but_checks_nothing",
        "tests/sub/test_crafted.py:15:test_async_checks_nothing",
        "tests/sub/test_crafted.py:38:test_a_raise_is_no_check_of_a_test_s_own",
        "tests/sub/test_crafted.py:45:TestGroup.test_method_checks_nothing",
        "tests/sub/test_crafted.py:63:test_sibling_function_that_checks_nothing",
    ]
