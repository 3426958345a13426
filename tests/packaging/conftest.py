"""Built once per session: wheels and sdists of every package (``hatch build --all``), and
a site-packages folder holding torch alone."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a freshly built wheel and sdist of each package under packages/."""
    hatch = shutil.which("hatch")
    if hatch is None:
        pytest.fail("the packaging tests build with Hatch: run them through ./hatchw run test")
    out = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run([hatch, "build", "--all", str(out)], cwd=ROOT, check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def torch_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding torch and what it needs, alone, as a site-packages would.

    The tests' fresh environments see it through a ``.pth`` file instead of installing torch
    each (see ``fresh_venv``); pip counts it as installed there. Its distributions are the ones
    this test run imports (torch==2.13.0, this machine's CPU wheel, which the packages' range
    torch>=2.4,<3 accepts), hard-linked rather than installed again: pip would unpack the same
    wheels, and the environments would then compile torch's modules on import, ~15 s of CPU
    that nothing here checks. Hard links, not symbolic ones: a file pip removed or Python
    rewrote there (both replace a file, never write into it) leaves this run's own alone.
    """
    site = tmp_path_factory.mktemp("torch_site")
    for distribution in with_requirements("torch"):
        for top in {path.parts[0] for path in distribution.files or []} - {"..", "__pycache__"}:
            source = Path(str(distribution.locate_file(top)))
            if source.is_dir():
                shutil.copytree(source, site / top, copy_function=os.link, dirs_exist_ok=True)
            else:
                os.link(source, site / top)
    return site


def with_requirements(name: str) -> list[importlib.metadata.Distribution]:
    """The installed distribution ``name`` and every one it requires, without extras."""
    found: dict[str, importlib.metadata.Distribution] = {}
    wanted = [name]
    while wanted:
        distribution = importlib.metadata.distribution(wanted.pop())
        key = canonicalize_name(distribution.metadata["Name"])
        if key not in found:
            found[key] = distribution
            for requirement in map(Requirement, distribution.requires or []):
                if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                    wanted.append(requirement.name)
    return list(found.values())
