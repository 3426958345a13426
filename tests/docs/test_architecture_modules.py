"""docs/architecture.md names every module of every package where it says what each package
holds: each ``.py`` file under ``packages/*/src/<import>/`` (``__init__.py`` aside) is named, in
backquotes, in that package's paragraph (``**accmt-state** (`packages/state/src/accmt_state/`):
...``), subfolders' modules included; accmt-trainer's, in the modules cell of its folder's row
of the rooms table (the ``root`` row for the modules at its root). A name that several
packages share (``_errors.py``) must appear in each one's place, and a name in one folder's row
does not stand for another folder's module of the same name."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE_PACKAGE = "accmt_trainer"  # described by the table of its folders, not a paragraph
ROW = re.compile(r"^\|\s*(root|`([^`/]+)/`)\s*\|([^|]*)\|", re.MULTILINE)


def paragraph_of(page: str, folder: str) -> str:
    """The paragraph(s) of ``page`` that open in bold and name ``folder`` in backquotes."""
    return "\n".join(
        paragraph
        for paragraph in re.split(r"\n\s*\n", page)
        if paragraph.lstrip().startswith("**") and f"`{folder}`" in paragraph
    )


def rows(page: str) -> dict[str, str]:
    """The rooms table: folder (``""`` for the root) -> its modules cell."""
    return {(match[2] or ""): match[3] for match in ROW.finditer(page)}


def named(place: str, name: str) -> bool:
    return f"`{name}`" in place


def unnamed(page: str, repo: Path) -> list[str]:
    """Every module file of ``repo``'s packages that ``page`` does not name where it should,
    as a path relative to ``repo``."""
    table = rows(page)
    missing = []
    for init in sorted(repo.glob("packages/*/src/*/__init__.py")):
        package = init.parent
        paragraph = paragraph_of(page, f"{package.relative_to(repo).as_posix()}/")
        for path in sorted(package.rglob("*.py")):
            if path.name == "__init__.py":
                continue
            if package.name == TABLE_PACKAGE:
                inside = path.relative_to(package).parts
                place = table.get(inside[0] if len(inside) > 1 else "", "")
            else:
                place = paragraph
            if not named(place, path.name):
                missing.append(path.relative_to(repo).as_posix())
    return missing


def test_the_architecture_page_names_every_module() -> None:
    page = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    assert unnamed(page, ROOT) == []


def test_every_package_and_every_trainer_folder_has_its_place() -> None:
    page = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    packages = sorted(ROOT.glob("packages/*/src/*/__init__.py"))
    assert len(packages) == 8
    for init in packages:
        if init.parent.name != TABLE_PACKAGE:
            assert paragraph_of(page, f"{init.parent.relative_to(ROOT).as_posix()}/"), init
    trainer = ROOT / "packages/trainer/src/accmt_trainer"
    folders = {path.parent.name for path in trainer.glob("*/__init__.py")}
    assert set(rows(page)) == folders | {""}


# The check itself, on a crafted repository and page: it must be able to fail.


def crafted(tmp_path: Path) -> Path:
    files = [
        "packages/decorators/src/accmt_decorators/__init__.py",
        "packages/decorators/src/accmt_decorators/_errors.py",
        "packages/decorators/src/accmt_decorators/_joining.py",
        "packages/accmt/src/accmt/__init__.py",
        "packages/accmt/src/accmt/_errors.py",
        "packages/accmt/src/accmt/_one_x/__init__.py",
        "packages/accmt/src/accmt/_one_x/_evaluator.py",
        "packages/trainer/src/accmt_trainer/__init__.py",
        "packages/trainer/src/accmt_trainer/_errors.py",
        "packages/trainer/src/accmt_trainer/integration.py",
        "packages/trainer/src/accmt_trainer/fit/__init__.py",
        "packages/trainer/src/accmt_trainer/fit/_options.py",
        "packages/trainer/src/accmt_trainer/inference/__init__.py",
        "packages/trainer/src/accmt_trainer/inference/_options.py",
    ]
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    return tmp_path


COMPLETE = """# Architecture

**accmt-decorators** (`packages/decorators/src/accmt_decorators/`): `_joining.py` joining;
`_errors.py`.

**accmt-trainer**: see its rooms below.

**accmt** (`packages/accmt/src/accmt/`): `_errors.py`; the 1.x layer `accmt/_one_x/`:
`_evaluator.py`.

| folder | modules | owns |
| --- | --- | --- |
| root | `_errors.py`, `integration.py` | the errors; what other packages use |
| `fit/` | `_options.py` | `FitOptions` |
| `inference/` | `_options.py` | `InferenceOptions` |
"""


def test_a_complete_page_passes(tmp_path: Path) -> None:
    assert unnamed(COMPLETE, crafted(tmp_path)) == []


def test_a_page_missing_a_module_fails(tmp_path: Path) -> None:
    repo = crafted(tmp_path)
    page = COMPLETE.replace("`_joining.py` joining;\n", "").replace(", `integration.py`", "")
    assert unnamed(page, repo) == [
        "packages/decorators/src/accmt_decorators/_joining.py",
        "packages/trainer/src/accmt_trainer/integration.py",
    ]


def test_a_shared_name_must_be_in_each_package_s_place(tmp_path: Path) -> None:
    repo = crafted(tmp_path)
    # accmt's _errors.py is named only in accmt-decorators' paragraph now.
    page = COMPLETE.replace("`_errors.py`; the 1.x layer", "the 1.x layer")
    # inference's _options.py is named only in fit/'s row now.
    page = page.replace("| `inference/` | `_options.py` |", "| `inference/` | |")
    assert unnamed(page, repo) == [
        "packages/accmt/src/accmt/_errors.py",
        "packages/trainer/src/accmt_trainer/inference/_options.py",
    ]
