"""Every shell command that README.md and docs/ mark as runnable runs, as a reader would run it:
in a fresh copy of the repository (its tracked files, and the untracked ones git does not
ignore), in reading order (README.md, then docs/ in the site's navigation order, each page top
to bottom), one after the other in that one folder, each to a zero exit status. A command
marked on several pages runs once, where it first appears.

**Marking.** An HTML comment on the line right before a fenced block, which neither GitHub nor
the site shows:

    <!-- runnable -->                                every command of the block
    <!-- runnable except "./hatchw run test" -->     all but the commands quoted

Each line of the block is a command (a line ending in a backslash goes on on the next; a
trailing ``# comment`` is the reader's). A marker that marks no block, or an ``except`` that
names no command of its block, fails ``test_every_marker_marks_commands``.

**Mapping.** ``./hatchw run NAME ARGS`` runs what Hatch would run in the default environment,
without Hatch: NAME's script in hatch.toml's ``[envs.default.scripts]`` (``{root}`` the copy,
``{args}`` the ARGS, or the ARGS appended; a command naming another script runs that one), or
else ``NAME ARGS`` itself. Every command runs in the environment running this test (its bin
folder first on PATH), which is the environment ``./hatchw run`` would use. A command that would
run pytest is refused: ``./hatchw run test`` is the suite, this test included. torchrun is given
a free port (``PET_MASTER_PORT``) so that it cannot meet another test's job on its default one;
``accmt launch`` picks a free port itself, and ``accelerate launch`` moves off one in use.

**Not marked**, and why:

- ``pip install ...``: installs from PyPI into the environment under test.
- ``./hatchw run test`` (README.md, docs/index.md): the suite, this test included.
- ``./hatchw run mkdocs build --strict`` and ``mkdocs serve`` (docs/index.md): the build is
  tests/docs/test_docs_build.py's, with its own checks; ``serve`` serves until stopped.
- docs/guides/accmt.md's ``./hatchw run main`` / ``accelerate launch`` / ``torchrun`` block: it
  trains the main job three more times (once to 40 epochs), which the README's quick start
  already runs once, and its ``accelerate launch --multi_gpu`` line needs two GPUs.
- ``accmt launch ... train.py`` (docs/guides/accmt.md) and ``accelerate launch ... train.py``
  (docs/guides/trainer.md): ``train.py`` stands for the reader's script, and most need GPUs.
- ``optuna-dashboard`` (docs/guides/search.md): serves until stopped, and is not installed here;
  hence also its example block, whose ``./hatchw run python examples/search_digits.py`` (20
  trials, about 17 s of CPU) is the one-process twin of the two-process search that is marked.
- ``./hatchw run python examples/train_lm.py`` (docs/guides/collators-language-modeling.md, in
  the text) and docs/guides/language-model.md's commands: a minute or two of CPU each, and
  ``pip install``; tests/docs/test_example_lm.py runs the script on one process in a terminal
  and tests/distributed/test_lm_guide.py on two through ``accmt launch``, on 16 help pages.
- docs/guides/fine-tuning.md's commands: ``pip install``, and runs of the whole help pages;
  tests/distributed/test_finetune_lora.py runs examples/finetune_lora.py on one process and
  then two, on 8 help pages.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from tests.distributed._launch import free_port

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest depends on tomli before Python 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!--\s*(runnable\b.*?)\s*-->")  # the whole line
FENCE = re.compile(r"\s*(`{3,}|~{3,})")


class Command(NamedTuple):
    page: str  # relative to the repository
    line: int  # where the command starts, from 1
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join(self.argv)}"


def pages(root: Path = ROOT) -> list[Path]:
    """README.md, then the site's pages in its navigation's order, then any page not in it."""
    nav = yaml.safe_load((root / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def walk(entry: Any) -> list[str]:
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, dict):
            return [page for value in entry.values() for page in walk(value)]
        return [page for item in entry for page in walk(item)]

    in_nav = [root / "docs" / page for page in walk(nav)]
    rest = sorted(set((root / "docs").rglob("*.md")) - set(in_nav))
    return [root / "README.md", *in_nav, *rest]


def block_commands(page: str, lines: list[tuple[int, str]]) -> list[Command]:
    """The commands of a block's lines (numbered from 1): continuations joined, comments and
    blank lines dropped."""
    commands, pending, start = [], "", 0
    for number, line in lines:
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        argv = tuple(shlex.split(pending + line, comments=True))
        pending = ""
        if argv:
            commands.append(Command(page, start, argv))
    return commands


def marked_commands(path: Path, root: Path = ROOT) -> tuple[list[Command], list[str]]:
    """The commands ``path`` marks runnable, in order, and what is wrong with its markers."""
    page = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    commands: list[Command] = []
    problems: list[str] = []
    for index, line in enumerate(lines):
        marker = MARKER.fullmatch(line.strip())
        if marker is None:
            if line.lstrip().startswith("<!--") and "runnable" in line:
                problems.append(f"{page}:{index + 1}: not a marker: {line.strip()!r}")
            continue
        where = f"{page}:{index + 1}"
        words = shlex.split(marker[1])
        if words[0] != "runnable" or words[1:2] not in ([], ["except"]) or len(words) == 2:
            problems.append(f'{where}: expected runnable or runnable except "COMMAND" ...')
            continue
        fence = FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
        if fence is None:
            problems.append(f"{where}: the line after the marker does not open a fenced block")
            continue
        body: list[tuple[int, str]] = []
        for number in range(index + 3, len(lines) + 1):
            if lines[number - 1].strip().startswith(fence[1]):
                break
            body.append((number, lines[number - 1]))
        else:
            problems.append(f"{where}: the block it marks is not closed")
            continue
        block = block_commands(page, body)
        excepted = {tuple(shlex.split(command)) for command in words[2:]}
        problems += [
            f"{where}: except {shlex.join(argv)!r} names no command of the block"
            for argv in sorted(excepted - {command.argv for command in block})
        ]
        if not block:
            problems.append(f"{where}: the block it marks holds no command")
        commands += [command for command in block if command.argv not in excepted]
    return commands, problems


def hatch_scripts(root: Path) -> dict[str, list[str]]:
    """hatch.toml's scripts of the default environment, each as its list of commands."""
    with (root / "hatch.toml").open("rb") as file:
        scripts = tomllib.load(file)["envs"]["default"].get("scripts", {})
    return {name: [body] if isinstance(body, str) else list(body) for name, body in scripts.items()}


def hatch_run(argv: list[str], root: Path, scripts: dict[str, list[str]]) -> list[list[str]]:
    """What ``./hatchw run ARGV`` runs in the default environment of the project at ``root``."""
    name, *args = argv
    if name not in scripts:
        return [argv]
    commands = []
    for command in scripts[name]:
        command = command.replace("{root}", str(root))  # first: {args:{root}/tests}
        if "{args" in command:
            command = re.sub(
                r"\{args(?::([^}]*))?\}",
                lambda match: shlex.join(args) if args else (match[1] or ""),
                command,
            )
        elif args:
            command += " " + shlex.join(args)
        commands += hatch_run(shlex.split(command), root, scripts)
    return commands


def as_run_here(argv: tuple[str, ...], root: Path) -> list[list[str]]:
    """The commands that running ``argv`` in the repository at ``root`` comes to."""
    if argv[:2] == ("./hatchw", "run") and len(argv) > 2:
        return hatch_run(list(argv[2:]), root, hatch_scripts(root))
    return [list(argv)]


def runs_pytest(argv: list[str]) -> bool:
    return Path(argv[0]).name in {"pytest", "py.test"} or argv[1:3] == ["-m", "pytest"]


def all_marked() -> tuple[list[Command], list[str]]:
    commands: list[Command] = []
    problems: list[str] = []
    for path in pages():
        found, wrong = marked_commands(path)
        # A command marked on several pages (the README's and the site's quick start) runs
        # once, where it first appears: run again, it would only find its own finished run.
        seen = {command.argv for command in commands}
        commands += [command for command in found if command.argv not in seen]
        problems += wrong
    return commands, problems


COMMANDS, PROBLEMS = all_marked()


def test_every_marker_marks_commands() -> None:
    assert PROBLEMS == []
    assert COMMANDS, "no command in README.md or docs/ is marked <!-- runnable -->"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository as a commit of its working tree would have it."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    root = tmp_path_factory.mktemp("clone")
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # not one deleted in the working tree
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    return root


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_the_marked_command_runs(clone: Path, command: Command) -> None:
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PET_MASTER_PORT": str(free_port()),
        "PYTHONUNBUFFERED": "1",
        # One thread a process, as in the suite's workers (tests/conftest.py), unless set.
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    commands = as_run_here(command.argv, clone)
    assert not any(runs_pytest(argv) for argv in commands), (
        f"{command} would run pytest (the suite, this test included): "
        f'mark its block <!-- runnable except "{shlex.join(command.argv)}" -->'
    )
    for argv in commands:
        done = subprocess.run(
            argv, cwd=clone, env=environment, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (
            f"{command}: {shlex.join(argv)} exited {done.returncode}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-5000:]}"
        )


# ------------------------------------------------------------ the marking and the mapping


def write_page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_marked_block_gives_its_commands_but_the_excepted_ones(tmp_path: Path) -> None:
    path = write_page(
        tmp_path,
        "Intro.\n"
        '<!-- runnable except "./hatchw run test" -->\n'
        "```bash\n"
        "./hatchw run main    # the main job\n"
        "\n"
        "# a comment line\n"
        "./hatchw run test    # every test\n"
        "torchrun --nproc_per_node 2 \\\n"
        "    examples/x.py --output 'runs/a b'\n"
        "```\n"
        "```bash\n"
        "pip install accmt\n"
        "```\n",
    )
    commands, problems = marked_commands(path, tmp_path)
    assert problems == []
    assert commands == [
        Command("page.md", 4, ("./hatchw", "run", "main")),
        Command(
            "page.md",
            8,
            ("torchrun", "--nproc_per_node", "2", "examples/x.py", "--output", "runs/a b"),
        ),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<!-- runnable -->\n\n```bash\nls\n```\n", "does not open a fenced block"),
        ("<!-- runnable -->\nls\n", "does not open a fenced block"),
        ("<!-- runnable -->\n```bash\nls\n", "is not closed"),
        ('<!-- runnable except "rm x" -->\n```bash\nls\n```\n', "'rm x' names no command"),
        ("<!-- runnable except -->\n```bash\nls\n```\n", "expected runnable or"),
        ("<!-- runnable: ls -->\n```bash\nls\n```\n", "expected runnable or"),
        ("<!-- runnable --> ls\n```bash\nls\n```\n", "not a marker"),
        ("<!-- runnable -->\n```bash\n# nothing\n```\n", "holds no command"),
    ],
)
def test_a_marker_that_marks_nothing_is_a_problem(tmp_path: Path, text: str, problem: str) -> None:
    _, problems = marked_commands(write_page(tmp_path, text), tmp_path)
    assert len(problems) == 1, problems
    assert problem in problems[0]


def test_hatchw_run_maps_to_the_script_or_the_command(tmp_path: Path) -> None:
    shutil.copy(ROOT / "hatch.toml", tmp_path)  # its scripts: main, test, ...
    assert as_run_here(("./hatchw", "run", "main"), tmp_path) == [
        ["python", f"{tmp_path}/examples/train_digits.py"]
    ]
    assert as_run_here(("./hatchw", "run", "python", "-m", "x", "a b"), tmp_path) == [
        ["python", "-m", "x", "a b"]
    ]
    assert as_run_here(("torchrun", "x.py"), tmp_path) == [["torchrun", "x.py"]]
    scripts = {"lint": ["ruff check {root}"], "all": ["lint", "pytest {args:{root}/tests}"]}
    assert hatch_run(["all"], tmp_path, scripts) == [
        ["ruff", "check", str(tmp_path)],
        ["pytest", f"{tmp_path}/tests"],
    ]
    assert hatch_run(["all", "-k", "x y"], tmp_path, scripts)[1] == ["pytest", "-k", "x y"]
    assert hatch_run(["lint", "--fix"], tmp_path, scripts) == [
        ["ruff", "check", str(tmp_path), "--fix"]
    ]


def test_the_suite_is_never_run_from_here() -> None:
    # ./hatchw run test runs pytest, and the test above refuses every command that does.
    assert any(runs_pytest(argv) for argv in as_run_here(("./hatchw", "run", "test"), ROOT))
    assert runs_pytest(["python", "-m", "pytest", "tests"])
    assert not runs_pytest(["python", "examples/train_digits.py"])
    assert not any(
        runs_pytest(argv) for command in COMMANDS for argv in as_run_here(command.argv, ROOT)
    )
