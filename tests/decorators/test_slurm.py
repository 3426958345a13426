"""SLURM's variables read as srun writes them: the host list expanded as ``scontrol show
hostnames`` does, a task's place, and torch's rendezvous written from them where torchrun's
variables are absent. (Two real processes forming one job from them:
tests/distributed/test_slurm.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accmt_decorators import (
    LauncherEnvironmentError,
    SlurmJob,
    expand_hostlist,
    export_slurm_rendezvous,
    slurm_job,
)

HOSTLISTS = {
    "a[1-3,5]": ["a1", "a2", "a3", "a5"],
    "n[01-02]-ib": ["n01-ib", "n02-ib"],
    "x,y[3-4]": ["x", "y3", "y4"],
    "gpu[01-02,05],login1": ["gpu01", "gpu02", "gpu05", "login1"],
    "node[1-3]": ["node1", "node2", "node3"],
    "n[8-10]": ["n8", "n9", "n10"],
    "n[098-101]": ["n098", "n099", "n100", "n101"],
    "n[1-002]": ["n1", "n2"],
    "a[1-2]b[3-4]": ["a1b3", "a1b4", "a2b3", "a2b4"],
    "n0[1-2]": ["n01", "n02"],
    "n[7]": ["n7"],
    "n[1,1]": ["n1", "n1"],
    " a , b ": ["a", "b"],
    "a,,b": ["a", "b"],
    "localhost": ["localhost"],
    "": [],
}

BAD_HOSTLISTS = {
    "n[3-1]": "runs backwards",
    "n[1-2": "not closed",
    "n[]": "not a number",
    "n[a-b]": "not a number",
    "n[-1]": "not a number",
    "n[1-2]]": "do not pair up",
    "n[[1]]": "do not pair up",
}

# SLURM's names that a test must not inherit from the machine it runs on.
SLURM_NAMES = [
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NNODES",
    "SLURM_STEP_NUM_NODES",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_JOB_NODELIST",
    "SLURM_STEP_NODELIST",
    "SLURM_NODELIST",
    "SLURM_CPUS_PER_TASK",
]

# Task 1 of `srun --nodes=2 --ntasks=4 --cpus-per-task=3 python train.py` in job 123456.
TASK = {
    "SLURM_JOB_ID": "123456",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "3",
    "SLURM_NTASKS": "4",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_NNODES": "2",
    "SLURM_TASKS_PER_NODE": "2(x2)",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_CPUS_PER_TASK": "3",
}


@pytest.mark.parametrize(("hostlist", "hosts"), HOSTLISTS.items())
def test_host_lists_expand_as_scontrol_does(hostlist: str, hosts: list[str]) -> None:
    assert expand_hostlist(hostlist) == hosts


@pytest.mark.parametrize(("hostlist", "why"), BAD_HOSTLISTS.items())
def test_a_bad_host_list_is_named(hostlist: str, why: str) -> None:
    with pytest.raises(LauncherEnvironmentError, match=rf"SLURM_JOB_NODELIST=.*{why}"):
        expand_hostlist(hostlist, "SLURM_JOB_NODELIST")


@st.composite
def host_lists(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A host list written from its parts, with the hosts those parts stand for."""
    names = st.text("abnxyz0123456789-._", min_size=1, max_size=4)
    items, hosts = [], []
    for _ in range(draw(st.integers(1, 3))):
        prefix, suffix = draw(names), draw(st.sampled_from(["", "-ib", "x"]))
        if draw(st.booleans()):
            items.append(prefix + suffix)
            hosts.append(prefix + suffix)
            continue
        ranges, numbers = [], []
        for _ in range(draw(st.integers(1, 3))):
            low, length = draw(st.integers(0, 120)), draw(st.integers(0, 3))
            width = draw(st.integers(len(str(low)), 4))
            high = low + length
            ranges.append(f"{low:0{width}d}" + (f"-{high:0{width}d}" if length else ""))
            numbers += [f"{number:0{width}d}" for number in range(low, high + 1)]
        items.append(f"{prefix}[{','.join(ranges)}]{suffix}")
        hosts += [f"{prefix}{number}{suffix}" for number in numbers]
    return ",".join(items), hosts


@given(host_lists())
def test_any_host_list_expands_to_the_hosts_it_was_written_from(
    case: tuple[str, list[str]],
) -> None:
    hostlist, hosts = case
    assert expand_hostlist(hostlist) == hosts


def test_scontrol_agrees_where_it_is_installed(tmp_path: Path) -> None:
    """Compared with SLURM's own ``scontrol show hostnames`` on the lists SLURM reads (22.05
    takes no text after a bracket, ``n[01-02]-ib``, which pdsh does); skipped without it."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        pytest.skip("scontrol is not installed")
    conf = tmp_path / "slurm.conf"  # scontrol reads a configuration even to expand a list
    conf.write_text(
        "ClusterName=probe\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\n"
        "PartitionName=debug Nodes=localhost Default=YES\n"
    )
    environment = {**os.environ, "SLURM_CONF": str(conf)}
    compared = 0
    for hostlist, hosts in HOSTLISTS.items():
        if not hostlist.strip():
            continue
        done = subprocess.run(
            [scontrol, "show", "hostnames", hostlist],
            capture_output=True,
            text=True,
            env=environment,
            timeout=30,
        )
        if "Invalid hostlist" in done.stdout + done.stderr:
            continue  # SLURM does not write it; accmt reads it as pdsh does
        if done.returncode != 0:
            pytest.skip(f"scontrol cannot run here: {done.stderr.strip()[:200]}")
        assert done.stdout.split() == hosts, hostlist
        compared += 1
    assert compared >= 10


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A task's environment, apart from this process's (which may be a SLURM job's)."""
    for name in SLURM_NAMES:
        monkeypatch.delenv(name, raising=False)
    return {"PATH": "/usr/bin"}


def test_a_task_s_place_is_read_from_srun_s_variables(environ: dict[str, str]) -> None:
    job = slurm_job({**environ, **TASK})
    assert job == SlurmJob(123456, 0, 3, 4, 1, 2, 1, 2, "gpu[07-08]", 3)
    assert job is not None
    assert job.in_step
    assert (job.hosts, job.main_address) == (["gpu07", "gpu08"], "gpu07")
    assert job.main_port == 10000 + 123456 % 20000 == 13456


def test_the_step_s_own_variables_come_before_the_job_s(environ: dict[str, str]) -> None:
    """A step on part of the allocation: its nodes and counts, not the allocation's."""
    task = {
        **TASK,
        "SLURM_STEP_NODELIST": "gpu08",
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2",
        "SLURM_PROCID": "1",
        "SLURM_NODEID": "0",
    }
    job = slurm_job(task)
    assert job is not None
    assert (job.num_processes, job.num_nodes, job.num_local_processes) == (2, 1, 2)
    assert job.main_address == "gpu08"


def test_the_batch_script_is_one_process_on_the_allocation(environ: dict[str, str]) -> None:
    """No SLURM_STEP_ID: not a task of srun, whatever SLURM_NTASKS says."""
    batch = {"SLURM_JOB_ID": "9", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}
    job = slurm_job({**batch, "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "n[1-2]"})
    assert job is not None
    assert not job.in_step
    assert (job.process_index, job.num_processes, job.num_nodes) == (0, 1, 2)
    assert slurm_job(environ) is None  # not in a SLURM job at all


def test_torch_s_variables_are_written_from_slurm_s(environ: dict[str, str]) -> None:
    task = {**environ, **TASK}
    exported = export_slurm_rendezvous(task)
    assert exported == {
        "MASTER_ADDR": "gpu07",
        "MASTER_PORT": "13456",
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "OMP_NUM_THREADS": "3",
    }
    assert task == {**environ, **TASK, **exported}
    assert export_slurm_rendezvous(task) == {}  # once written, nothing more to write


def test_what_the_user_or_torchrun_set_wins(environ: dict[str, str]) -> None:
    by_hand = {**environ, **TASK, "MASTER_ADDR": "10.0.0.7", "OMP_NUM_THREADS": "1"}
    exported = export_slurm_rendezvous(by_hand)
    assert "MASTER_ADDR" not in exported
    assert "OMP_NUM_THREADS" not in exported
    assert (by_hand["MASTER_ADDR"], by_hand["MASTER_PORT"]) == ("10.0.0.7", "13456")
    under_torchrun = {**environ, **TASK, "RANK": "0", "WORLD_SIZE": "8"}
    assert export_slurm_rendezvous(under_torchrun) == {}
    assert under_torchrun == {**environ, **TASK, "RANK": "0", "WORLD_SIZE": "8"}


def test_one_task_or_the_batch_script_forms_no_job(environ: dict[str, str]) -> None:
    """A step of one task is a plain run (its threads still SLURM's); the batch script is not
    a task."""
    one = {**environ, **TASK, "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_NNODES": "1"}
    one.update(SLURM_NODEID="0", SLURM_LOCALID="0", SLURM_TASKS_PER_NODE="1")
    assert export_slurm_rendezvous(one) == {"OMP_NUM_THREADS": "3"}
    batch = {key: value for key, value in TASK.items() if key != "SLURM_STEP_ID"}
    assert export_slurm_rendezvous({**environ, **batch}) == {}


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"SLURM_PROCID": "one"}, "SLURM_PROCID='one' is not a whole number"),
        ({"SLURM_PROCID": "4"}, "SLURM_PROCID=4 is not below the step's 4"),
        ({"SLURM_NODEID": "2"}, "SLURM_NODEID=2 is not below the step's 2"),
        ({"SLURM_TASKS_PER_NODE": "2(x)"}, "SLURM_TASKS_PER_NODE='2\\(x\\)'"),
    ],
)
def test_a_variable_srun_would_not_write_is_named(
    environ: dict[str, str], changes: dict[str, str], named: str
) -> None:
    with pytest.raises(LauncherEnvironmentError, match=named):
        slurm_job({**TASK, **changes})


def test_several_nodes_and_no_node_list_is_named(environ: dict[str, str]) -> None:
    job = slurm_job({key: value for key, value in TASK.items() if key != "SLURM_JOB_NODELIST"})
    assert job is not None
    with pytest.raises(LauncherEnvironmentError, match="SLURM_JOB_NODELIST is not set"):
        _ = job.main_address
    one_node = {**TASK, "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": ""}
    single = slurm_job(one_node)
    assert single is not None
    assert single.main_address == "127.0.0.1"
