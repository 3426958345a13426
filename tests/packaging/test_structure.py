"""All the repository's Python reads as ruff lays it out: no line of any .py file (packages,
tests, benchmarks, examples, docs, .ci) is kept from ruff's layout by a ``fmt`` comment (skip,
off and on, or yapf's disable and enable, which ruff honours alike), nor any Python block of the
Markdown pages ruff formats. The one exception is tests/accmt/accmt_1x_tests, accmt 1.9.5.1's
own test files vendored byte for byte, which ruff does not read.

A module's length is no rule of its own: one concept per module, whatever its length
(DESIGN.md)."""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENDORED = Path("tests/accmt/accmt_1x_tests")

# A comment that makes ruff keep a line (or lines) as written: "fmt" with skip, off or on,
# "yapf" with disable or enable (test_the_check_sees_every_kind_of_marker writes each out),
# also where it follows another comment on the line.
PY_MARKER = re.compile(r"#\s*(?:fmt:\s*(?:skip|off|on)|yapf:\s*(?:disable|enable))\b")
# The same as an HTML comment in Markdown, where ruff formats Python code blocks.
MD_MARKER = re.compile(r"<!--\s*fmt:\s*(?:skip|off|on)\s*-->")


def repository_files(suffix: str) -> list[Path]:
    """The files of the repository (tracked, or new and not ignored) that end in ``suffix``,
    relative to its root, less the vendored folder."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", f"*{suffix}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    paths = {Path(name) for name in listed if name}
    return sorted(
        path
        for path in paths
        if VENDORED not in path.parents and (ROOT / path).is_file()  # not a deleted one
    )


def kept_lines(path: Path) -> list[int]:
    """The numbers of the lines of ``path`` where a comment keeps code from ruff's layout.

    Python is read token by token, so a string or docstring that names such a comment (as
    this module's do) is not one."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return [
            number for number, line in enumerate(text.splitlines(), 1) if MD_MARKER.search(line)
        ]
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [
        token.start[0]
        for token in tokens
        if token.type == tokenize.COMMENT and PY_MARKER.search(token.string)
    ]


def test_every_part_of_the_repository_is_checked() -> None:
    checked = repository_files(".py")
    tops = {path.parts[0] for path in checked}
    assert {".ci", "benchmarks", "docs", "examples", "packages", "tests"} <= tops
    packages = {path.parts[1] for path in checked if path.parts[0] == "packages"}
    folders = {
        path.name for path in (ROOT / "packages").iterdir() if (path / "pyproject.toml").exists()
    }
    assert packages == folders
    assert len(folders) == 8
    assert Path("tests/packaging/test_structure.py") in checked
    assert not [path for path in checked if VENDORED in path.parents]
    # The vendored folder is there, and only it is left out.
    assert (ROOT / VENDORED).is_dir()


def test_no_line_is_kept_from_ruff_s_layout() -> None:
    kept = [
        f"{path}:{number}"
        for path in [*repository_files(".py"), *repository_files(".md")]
        for number in kept_lines(ROOT / path)
    ]
    assert kept == []


def test_the_check_sees_every_kind_of_marker(tmp_path: Path) -> None:
    module = tmp_path / "kept.py"
    module.write_text(
        "x = [1,2]  # fmt: skip\n"
        '"""# fmt: skip, in a string, keeps nothing."""\n'
        "# fmt: off\n"
        "y = [1,2]\n"
        "# fmt: on\n"
        "z = f(1,2)  # type: ignore  # fmt:skip\n"
        "# yapf: disable\n"
        "s = '# fmt: off'\n",
        encoding="utf-8",
    )
    assert kept_lines(module) == [1, 3, 5, 6, 7]
    page = tmp_path / "page.md"
    page.write_text("text\n<!-- fmt: off -->\n```python\nx = [1,2]\n```\n<!-- fmt:on -->\n")
    assert kept_lines(page) == [2, 6]
