"""accmt 1.9.5.1's own curriculum tests (``src/tests/curriculum.py``: default, steps, ratio,
range), unchanged, pass through this repository's ``accmt``.

The files are vendored byte for byte in accmt_1x_tests/ (see its README: where they come
from, their Apache-2.0 license). They are run as 1.x ran them: pytest on ``curriculum.py`` in a
package named ``tests`` (it imports its dummy modules relatively), on one process, from a
folder of its own, since they write ``dummy_model`` where they run. One pytest process runs the
four; each test here reads one's outcome from its JUnit report."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

VENDORED = Path(__file__).parent / "accmt_1x_tests"
# sha256 of each file as accmt-1.9.5.1.tar.gz (PyPI) ships it under src/tests/.
SHIPPED = {
    "__init__.py": "cb50813e2b7c646d530e30d4b1437dd4ce417692e5e44e65a7a3ef0ccf51fdf7",
    "curriculum.py": "9f45ab0b2ff215a435a955ee71ddd47a381bef9fd92813498e9c585ab593b41f",
    "dummy_callbacks.py": "1d06bf3461b3e82358d25339c3294a491c06cdafd6e8a7c4fe491613fadde438",
    "dummy_datasets.py": "304e30375d7240ee6207c232b7a61719fbbcfce1c35e799c1bf0c161795c271b",
    "dummy_metrics.py": "8cbedb0af912607c448b8968b07b78bcb8a4aa7fb07713fd779507d7b03a58b3",
    "dummy_modules.py": "6e3343ae088bd2c5eaff118357ada56c923dd06292c3fa4366cfa66cf6e1b6ee",
}
ONE_X_TESTS = [
    "test_default_curriculum",
    "test_steps_curriculum",
    "test_ratio_curriculum",
    "test_range_curriculum",
]
# Written next to 1.x's package, not in it: which accmt the run imported.
WHICH_ACCMT = """\
from pathlib import Path

import accmt

imported = f"{accmt.__version__} {accmt.__file__}"
Path(__file__).with_name("accmt_imported.txt").write_text(imported)
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each 1.x test's outcome ("passed", or what failed and why), from one pytest run."""
    where = tmp_path_factory.mktemp("accmt_1x")
    shutil.copytree(VENDORED, where / "tests", ignore=shutil.ignore_patterns("*.md", "LICENSE"))
    (where / "pytest.ini").write_text("[pytest]\n")  # not this repository's settings
    (where / "conftest.py").write_text(WHICH_ACCMT)
    report = where / "report.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "tests/curriculum.py",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    done = subprocess.run(
        [*command, f"--junitxml={report}"], cwd=where, capture_output=True, text=True, timeout=540
    )
    assert done.returncode in (0, 1), done.stdout[-4000:] + done.stderr[-4000:]  # 1: a test failed
    version, path = (where / "accmt_imported.txt").read_text().split(" ", 1)
    assert version.startswith("2."), path
    assert "packages/accmt" in path.replace("\\", "/"), path
    return {
        case.get("name", ""): _outcome(case) for case in ElementTree.parse(report).iter("testcase")
    }


def _outcome(case: ElementTree.Element) -> str:
    for kind in ("failure", "error", "skipped"):
        found = case.find(kind)
        if found is not None:
            return f"{kind}: {found.get('message')}\n{(found.text or '')[-3000:]}"
    return "passed"


def test_the_vendored_files_are_those_1_9_5_1_shipped() -> None:
    found = {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in VENDORED.glob("*.py")
    }
    assert found == SHIPPED


def test_pytest_ran_1x_s_four_curriculum_tests(outcomes: dict[str, str]) -> None:
    assert sorted(outcomes) == sorted(ONE_X_TESTS)


@pytest.mark.parametrize("name", ONE_X_TESTS)
def test_a_1x_curriculum_test_passes_unchanged(outcomes: dict[str, str], name: str) -> None:
    assert outcomes.get(name) == "passed", outcomes.get(name)
