"""How the suite is dealt to pytest-xdist's workers (``pytest -n 2 --dist loadfile``).

- A file's tests go to one worker together (``--dist loadfile``), so its module-scoped fixtures
  (a site built once, a reference run launched once) are made once; so do all of
  tests/packaging, which shares session fixtures (the wheels, an environment with torch) across
  its files, and all of tests/slurm, which shares one SLURM cluster (no two workers start
  daemons). This is done by a scheduler of our own (``pytest_xdist_make_scheduler``) rather
  than ``--dist loadgroup`` marks: xdist 3.8 marks a group by renaming the test's node id, and
  pytest 9 ignores that rename, so loadgroup falls back to sending each test anywhere.
- The long files start first: the packaging tests (one chain of wheel builds and fresh
  environments), the SLURM tests (jobs that wait out a time limit), then the files whose tests
  launch processes, longest first, and then the many
  short in-process tests, which fill in whatever time the workers have left.
- Each worker computes on one thread (OMP_NUM_THREADS=1, unless set already).

Without xdist (``pytest`` alone) only the order changes; each file's tests keep theirs.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

if "PYTEST_XDIST_WORKER" in os.environ:
    # Set before any test module imports torch: each worker computes on one thread, so that
    # the workers (one per core) and the processes their tests launch do not oversubscribe
    # the cores with OpenMP threads. The tests' models are too small to gain from more.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Folders whose files share session-scoped fixtures (wheels and environments; a SLURM cluster):
# all their tests go to one worker.
ONE_WORKER = ["tests/packaging/", "tests/slurm/"]

# Files whose tests launch processes (or build wheels and environments), the longest first;
# their order here is only the order they start in.
LONG_FIRST = [
    "tests/packaging/",
    "tests/slurm/",
    "tests/distributed/test_resume.py",
    "tests/distributed/test_elastic.py",
    "tests/distributed/test_one_x_programs.py",
    "tests/distributed/test_collators_resume.py",
    "tests/distributed/test_hook_order.py",
    "tests/distributed/test_trainer.py",
    "tests/distributed/test_fsdp.py",
    "tests/distributed/test_inference.py",
    "tests/search/test_postgresql.py",
    "tests/search/test_killed_search.py",
    "tests/distributed/",
    "tests/search/test_search.py",
    "tests/accmt/test_one_x_curriculum_suite.py",
    "tests/trainer/test_folder_lock.py",
    "tests/docs/",
]


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::")[0]
    for rank, prefix in enumerate(LONG_FIRST):
        if path.startswith(prefix):
            return rank
    return len(LONG_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: each file keeps its own order


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadfile``: one unit of work a file (a folder in ONE_WORKER), dealt in the
    order collected, the long ones first."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesInCollectionOrder(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            return next((folder for folder in ONE_WORKER if path.startswith(folder)), path)

    config.option.loadscopereorder = False  # keep the order collected: the long ones first
    return FilesInCollectionOrder(config, log)
