"""Two workers share one study on a real PostgreSQL server, which the test starts and stops
itself: in parallel they finish n_trials between them, and no trial is run twice."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ..distributed._launch import free_port

WORKER = Path(__file__).parent / "workers" / "search_worker.py"


def postgres_binaries() -> Path:
    """The folder of initdb and pg_ctl: Debian keeps them out of PATH."""
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (folder / "initdb").is_file():
            return folder
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.fail(
            "PostgreSQL is not installed; this test runs a real server: "
            "apt-get install postgresql (as .ci/run does)"
        )
    return Path(initdb).parent


def server_command(*command: str) -> None:
    """Run ``command`` as the server's user: the server refuses to run as root (Debian's
    package made the postgres user)."""
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*as_user, *command], check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server on a free loopback port; yields its URL."""
    binaries = postgres_binaries()
    home = Path(tempfile.mkdtemp(prefix="accmt-pg-"))
    if os.geteuid() == 0:
        shutil.chown(home, "postgres", "postgres")
    data, port, pg_ctl = home / "data", free_port(), str(binaries / "pg_ctl")
    server_command(str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                   "--no-sync")  # fmt: skip
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {home} -c fsync=off"
    server_command(pg_ctl, "-D", str(data), "-l", str(home / "log"), "-o", options, "-w", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        server_command(pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(home, ignore_errors=True)


def test_two_workers_share_one_study_and_run_each_trial_once(postgres: str, tmp_path: Path) -> None:
    n_trials = 8
    shared = ["--trials", str(n_trials), "--storage", postgres, "--epochs", "2",
              "--barrier", str(tmp_path / "barrier"), "--workers", "2"]  # fmt: skip
    workers = [start_worker(tmp_path / f"worker{index}", index, shared) for index in range(2)]
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr[-3000:]
        assert f'RESULT {{"finished": {n_trials}' in stdout

    # The workers' URL names no driver (accmt-search picks psycopg 3); SQLAlchemy before 2.1
    # reads a bare postgresql:// as psycopg2, which is not installed here.
    driver_url = postgres.replace("postgresql://", "postgresql+psycopg://", 1)
    study = optuna.load_study(study_name="accmt-search", storage=driver_url)
    trials = study.get_trials()
    ended = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(ended) == n_trials
    # A trial asked past n_trials by a worker that lost a race is marked so and never trained.
    for other in (t for t in trials if t not in ended):
        assert other.state == TrialState.FAIL
        assert other.user_attrs["accmt_search"]["outcome"] == "surplus"

    trained = [trained_folders(tmp_path / f"worker{index}") for index in range(2)]
    everything = trained[0] + trained[1]
    assert len(everything) == n_trials
    assert len(set(everything)) == n_trials  # each trial ran once
    assert set(everything) == {f"trial_{t.number}" for t in ended}
    assert trained[0], f"worker 0 trained nothing: {trained}"
    assert trained[1], f"worker 1 trained nothing: {trained}"


def start_worker(out: Path, seed: int, shared: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(WORKER), str(out), "--seed", str(seed), *shared]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def trained_folders(out: Path) -> list[str]:
    lines = (out / "trained_rank0.jsonl").read_text().splitlines()
    return [json.loads(line)["folder"] for line in lines]
