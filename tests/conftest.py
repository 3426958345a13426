"""How the suite is dealt to pytest-xdist's workers (``pytest -n 2 --dist loadgroup``).

- Tests that share a module- or session-scoped fixture of this suite (a site built once, the
  wheels built once, a reference run launched once) go to one worker together, so the fixture
  is made once and not once per worker. Fixtures that cost nothing to make again are left out.
- The long tests start first: the packaging tests (one chain of wheel builds and fresh
  environments), then the jobs that launch processes, longest first, and then the many short
  in-process tests, which fill in whatever time the workers have left.

- Each worker computes on one thread (OMP_NUM_THREADS=1, unless set already).

Without xdist (``pytest`` alone) only the order changes; each module's tests keep theirs.
"""

from __future__ import annotations

import os

import pytest

if "PYTEST_XDIST_WORKER" in os.environ:
    # Set before any test module imports torch: each worker computes on one thread, so that
    # the workers (one per core) and the processes their tests launch do not oversubscribe
    # the cores with OpenMP threads. The tests' models are too small to gain from more.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Module- or session-scoped fixtures that are cheap to make again: tests using them need not
# share a worker.
CHEAP_SHARED_FIXTURES = {
    "data",  # tests/search/conftest.py: the digits arrays, in memory
    "expected",  # tests/distributed/test_metrics.py: one in-process pass over 100 samples
    "folder",  # tests/state/test_properties.py: an empty temporary folder
}

# Files whose tests launch processes (or build wheels and environments), the longest first;
# their order here is only the order they start in.
LONG_FIRST = [
    "tests/packaging/",
    "tests/distributed/test_resume.py",
    "tests/distributed/test_one_x_programs.py",
    "tests/distributed/test_collators_resume.py",
    "tests/distributed/test_hook_order.py",
    "tests/distributed/test_trainer.py",
    "tests/search/test_postgresql.py",
    "tests/search/test_killed_search.py",
    "tests/distributed/",
    "tests/search/test_search.py",
    "tests/trainer/test_folder_lock.py",
    "tests/docs/",
]


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::")[0]
    for rank, prefix in enumerate(LONG_FIRST):
        if path.startswith(prefix):
            return rank
    return len(LONG_FIRST)


def _shared_fixtures(item: pytest.Item) -> list[str]:
    """This suite's module- and session-scoped fixtures the test uses, as baseid::name."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    shared = []
    for name, definitions in info.name2fixturedefs.items():
        definition = definitions[-1]
        if definition.scope == "function" or name in CHEAP_SHARED_FIXTURES:
            continue
        if not definition.baseid.startswith("tests"):  # pytest's own, such as tmp_path_factory
            continue
        # A parametrized one is made once per parameter: one group each.
        callspec = getattr(item, "callspec", None)
        param = f"[{callspec.params[name]}]" if callspec and name in callspec.params else ""
        shared.append(f"{definition.baseid}::{name}{param}")
    return sorted(shared)


def _groups(items: list[pytest.Item]) -> dict[str, str]:
    """Tests joined by a shared fixture, transitively: nodeid -> group name."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    uses = {item.nodeid: _shared_fixtures(item) for item in items}
    for fixtures in uses.values():
        for other in fixtures[1:]:
            parent[root(other)] = root(fixtures[0])
    return {nodeid: root(fixtures[0]) for nodeid, fixtures in uses.items() if fixtures}


# First: xdist's own hook (on the workers) reads the xdist_group marks set here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: each file keeps its own order
    groups = _groups(items)
    for item in items:
        group = groups.get(item.nodeid)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
