"""Every package stays easy to read as ruff lays it out: no module over 400 lines (in every
folder of every package), and no line kept from ruff's layout with ``# fmt: skip``."""

from __future__ import annotations

from pathlib import Path

PACKAGES = Path(__file__).resolve().parents[2] / "packages"
SOURCES = sorted(PACKAGES.glob("*/src/**/*.py"))


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_every_package_is_checked() -> None:
    checked = {path.relative_to(PACKAGES).parts[0] for path in SOURCES}
    folders = {path.name for path in PACKAGES.iterdir() if (path / "pyproject.toml").exists()}
    assert checked == folders
    assert len(folders) == 8


def test_no_module_is_over_400_lines() -> None:
    over = {str(path.relative_to(PACKAGES)): lines(path) for path in SOURCES if lines(path) > 400}
    assert over == {}


def test_no_line_is_kept_from_ruff_s_layout() -> None:
    skipped = [
        f"{path.relative_to(PACKAGES)}:{number}"
        for path in SOURCES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert skipped == []


def test_the_size_check_sees_a_long_module(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text("x = 1\n" * 401, encoding="utf-8")
    assert lines(long) == 401
