"""docs/architecture.md shows the path of one resume: its steps are ``Resume.restore``'s, in
the code's order, and ``Fit._train`` asks for them in the order the page gives."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

from accmt_trainer.checkpointing._checkpoints import Checkpoints
from accmt_trainer.fit._fit import Fit
from accmt_trainer.fit._resume import Resume

PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
MARK = "<!-- the resume path"


def page_block(page: str) -> str:
    """The text block after the resume path's marker."""
    after = page[page.index(MARK) :]
    return after.split("```text\n", 1)[1].split("```", 1)[0]


def numbered(lines: list[str], pattern: str) -> list[int]:
    return [int(match.group(1)) for line in lines if (match := re.match(pattern, line))]


def code_steps() -> list[int]:
    source = inspect.getsource(Resume.restore)
    return numbered([line.strip() for line in source.splitlines()], r"# (\d+)\. ")


def page_steps(block: str) -> list[int]:
    return numbered([line.strip() for line in block.splitlines()], r"(\d+)\. ")


def calls_in_order(function: object) -> list[str]:
    """What ``function`` calls, in source order: ``name`` or ``variable.attribute``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    calls.sort(key=lambda node: (node.lineno, node.col_offset))
    names = []
    for call in calls:
        target = call.func
        if isinstance(target, ast.Attribute):
            owner = target.value.id if isinstance(target.value, ast.Name) else "..."
            names.append(f"{owner}.{target.attr}")
        else:
            names.append(getattr(target, "id", ""))
    return names


def test_the_page_s_steps_are_the_code_s() -> None:
    block = page_block(PAGE.read_text(encoding="utf-8"))
    steps = code_steps()
    assert steps == list(range(1, len(steps) + 1))
    assert len(steps) >= 4
    assert page_steps(block) == steps
    for name in ("Resume.restore", "Checkpoints.start", "prepare_data", "prepare_run"):
        assert name in block
    assert callable(Resume.restore)
    assert callable(Checkpoints.start)


def test_the_fit_asks_in_the_page_s_order() -> None:
    calls = calls_in_order(Fit._train)
    order = ["prepare_data", "checkpoints.start", "prepare_run", "start_trackers"]
    positions = [calls.index(name) for name in order]
    # The run that goes on is restored last (the first restore is a finished run's).
    positions.append(len(calls) - 1 - calls[::-1].index("resume.restore"))
    assert positions == sorted(positions)
    # Read back once: one restore for a run that goes on, one for one that had finished.
    assert calls.count("resume.restore") == 2
    assert calls.count("checkpoints.start") == 1


def test_a_page_out_of_step_is_seen() -> None:
    page = f"{MARK} -->\n```text\n  1. a\n  3. c\n  2. b\n```\n"
    assert page_steps(page_block(page)) == [1, 3, 2]
    assert page_steps(page_block(page)) != code_steps()
