""".ci/minimums.py, which the `minimums` environment runs: the pins it reads from the packages'
declared dependencies."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("minimums", ROOT / ".ci" / "minimums.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def workspace(tmp_path: Path, packages: dict[str, list[str]]) -> Path:
    for name, dependencies in packages.items():
        folder = tmp_path / "packages" / name
        folder.mkdir(parents=True)
        listed = ", ".join(f"'{dependency}'" for dependency in dependencies)
        (folder / "pyproject.toml").write_text(
            f'[project]\nname = "{name}"\nversion = "2.0.0"\ndependencies = [{listed}]\n'
        )
    return tmp_path


def test_each_dependency_is_pinned_at_its_highest_declared_minimum(tmp_path: Path) -> None:
    root = workspace(
        tmp_path,
        {
            "accmt-low": ["attrs>=23.1", "torch>=2.4", "PyYAML>=6.0,<7", "rich[jupyter]~=13.1"],
            "accmt-high": ["accmt-low>=2.0,<3", "attrs>=23.2", 'tomli>=2; python_version<"3"'],
        },
    )
    # Siblings and torch are left alone; a marker that does not apply leaves its entry out.
    assert load_script().pins(root) == ["attrs==23.2", "PyYAML==6.0", "rich[jupyter]==13.1"]


def test_an_extra_that_one_package_requires_of_another_is_pinned_too(tmp_path: Path) -> None:
    declared = {
        "accmt-top": ('["accmt-low[streams]>=2.0,<3"]', 'x = ["tqdm>=4.66"]'),
        "accmt-low": (
            '["attrs>=23.1"]',
            'streams = ["torchdata>=0.11,<0.12", "accmt-top[x]"]\nhf = ["transformers>=4.46"]',
        ),
    }
    for name, (dependencies, extras) in declared.items():
        folder = tmp_path / "packages" / name
        folder.mkdir(parents=True)
        (folder / "pyproject.toml").write_text(
            f'[project]\nname = "{name}"\nversion = "2.0.0"\ndependencies = {dependencies}\n'
            f"[project.optional-dependencies]\n{extras}\n"
        )
    # The extra asked for is pinned, and the extra it asks for; not the others.
    assert load_script().pins(tmp_path) == ["attrs==23.1", "torchdata==0.11", "tqdm==4.66"]
    found = [(where, str(r)) for where, r in load_script().declared(tmp_path)]
    assert ("packages/accmt-low/pyproject.toml [streams]", "torchdata<0.12,>=0.11") in found


def test_a_dependency_without_a_minimum_is_refused(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"accmt-x": ["tqdm<5"]})
    with pytest.raises(SystemExit, match=r"packages/accmt-x/pyproject.toml: tqdm<5 declares no"):
        load_script().pins(root)


def test_the_repository_pins_every_third_party_dependency() -> None:
    pinned = {pin.split("==")[0].split("[")[0].lower() for pin in load_script().pins()}
    declared = {
        requirement.name.lower()
        for _, requirement in load_script().declared()
        if not requirement.name.startswith("accmt") and requirement.name != "torch"
    }
    assert pinned == declared
    assert "accelerate" in pinned
