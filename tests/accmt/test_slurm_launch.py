"""``accmt launch`` under SLURM: run by ``srun --ntasks-per-node=1`` on each node, the machines,
this one's rank and where they meet are SLURM's; outside srun on several nodes it is refused by
name; options given and variables set by hand win. Planning only: nothing is launched."""

from __future__ import annotations

import argparse

import pytest
from accelerate.commands.launch import launch_command_parser

from accmt._cli import LaunchError, LaunchPlan, build_parser, main, plan_launch

# The accmt launch task on node 1 of `srun --nodes=2 --ntasks-per-node=1 --cpus-per-task=8`.
NODE_TASK = {
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "1",
    "SLURM_NTASKS": "2",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "1",
    "SLURM_NNODES": "2",
    "SLURM_TASKS_PER_NODE": "1(x2)",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_CPUS_PER_TASK": "8",
}
# The batch script of `sbatch --nodes=2`: the job's variables, no step.
BATCH_SCRIPT = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NNODES": "2",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_PROCID": "0",
}


def plan(environ: dict[str, str], *argv: str, gpus: int = 0) -> LaunchPlan:
    options = build_parser().parse_args(["launch", *argv, "train.py"])
    return plan_launch(options, cuda_devices=gpus, environ=environ)


def accelerate_sees(launch: LaunchPlan) -> argparse.Namespace:
    return launch_command_parser().parse_args(list(launch.accelerate_args))


def test_one_task_per_node_is_one_machine_each() -> None:
    launch = plan(NODE_TASK, "-N", "4", gpus=4)
    seen = accelerate_sees(launch)
    assert (seen.num_processes, seen.num_machines, seen.machine_rank) == (8, 2, 1)
    # The step's first node, and 10000 + job id % 20000: the same on every node.
    assert (seen.main_process_ip, seen.main_process_port) == ("gpu07", 14242)
    assert seen.multi_gpu
    # Threads: the task's 8 CPUs shared by this machine's 4 processes.
    assert launch.environment["OMP_NUM_THREADS"] == "2"


def test_one_node_under_srun_is_a_plain_one_machine_launch() -> None:
    one = {**NODE_TASK, "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_NODEID": "0"}
    one.update(SLURM_NNODES="1", SLURM_TASKS_PER_NODE="1", SLURM_JOB_NODELIST="gpu07")
    launch = plan(one, "--cpu", "-N", "2")
    seen = accelerate_sees(launch)
    assert (seen.num_processes, seen.num_machines, seen.main_process_ip) == (2, 1, "127.0.0.1")
    assert launch.environment["OMP_NUM_THREADS"] == "4"


def test_outside_srun_on_several_nodes_it_is_refused_by_name() -> None:
    with pytest.raises(LaunchError, match=r"outside srun in SLURM job 4242, an allocation of 2"):
        plan(BATCH_SCRIPT, "--cpu", "-N", "2")
    # On one node the batch script is the machine: its CPUs, not the node's.
    one_node = {**BATCH_SCRIPT, "SLURM_JOB_NUM_NODES": "1", "SLURM_CPUS_PER_TASK": "6"}
    launch = plan(one_node, "--cpu", "-N", "2")
    assert accelerate_sees(launch).num_machines == 1
    assert launch.environment["OMP_NUM_THREADS"] == "3"


def test_the_refusal_reaches_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in BATCH_SCRIPT.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLURM_STEP_ID", raising=False)
    with pytest.raises(SystemExit) as exit_status:
        main(["launch", "--cpu", "-N", "2", "train.py"])
    assert exit_status.value.code == 2
    assert "accmt launch: runs outside srun" in capsys.readouterr().err


def test_several_tasks_on_a_node_are_refused_by_name() -> None:
    """``srun --ntasks=2 accmt launch`` would start two launchers on one node."""
    two_tasks = {**NODE_TASK, "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_PROCID": "0"}
    with pytest.raises(LaunchError, match=r"2 task\(s\) on 1 node\(s\).*--ntasks-per-node=1"):
        plan(two_tasks, "--cpu", "-N", "2")


def test_options_given_win_over_slurm_s() -> None:
    seen = accelerate_sees(plan(NODE_TASK, "-N", "2", "--main-port", "29555", gpus=2))
    assert (seen.main_process_ip, seen.main_process_port, seen.machine_rank) == (
        "gpu07",
        29555,
        1,
    )
    mine = ["--num-machines", "3", "--machine-rank", "0", "--main-address", "10.0.0.7"]
    seen = accelerate_sees(plan(NODE_TASK, "-N", "2", *mine, "--main-port", "29555", gpus=2))
    assert (seen.num_machines, seen.machine_rank, seen.main_process_ip) == (3, 0, "10.0.0.7")
    # Given by hand, the machines are the user's, srun or not.
    seen = accelerate_sees(plan(BATCH_SCRIPT, "--cpu", "--num-machines", "1"))
    assert seen.num_machines == 1


def test_variables_set_by_hand_win_over_slurm_s() -> None:
    """A batch script that exported MASTER_ADDR, MASTER_PORT and OMP_NUM_THREADS keeps them."""
    by_hand = {**NODE_TASK, "MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "29600"}
    launch = plan({**by_hand, "OMP_NUM_THREADS": "1"}, "-N", "2", gpus=2)
    seen = accelerate_sees(launch)
    assert (seen.main_process_ip, seen.main_process_port) == ("10.0.0.9", 29600)
    assert "OMP_NUM_THREADS" not in launch.environment


def test_a_variable_srun_would_not_write_is_named() -> None:
    with pytest.raises(LaunchError, match=r"SLURM_JOB_NODELIST='gpu\[07-\]'"):
        plan({**NODE_TASK, "SLURM_JOB_NODELIST": "gpu[07-]"}, "-N", "2", gpus=2)
