"""The ``accmt`` command line: accmt 1.x's ``launch`` options turned into Accelerate's, and
``accmt strats``. Real launches: tests/distributed/test_cli_launch.py."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest
from accelerate.commands.launch import launch_command_parser

from accmt._cli import LaunchError, LaunchPlan, build_parser, main, plan_launch
from accmt._strategies import STRATEGIES
from accmt._supervisor import exit_status_of

# accmt 1.9.5.1's strategies: the names of the Accelerate config files it shipped.
ONE_X_STRATEGIES = [
    "ddp",
    "ddp-bf16",
    "ddp-fp16",
    "ddp-fp32",
    "ddp-fp8",
    "fsdp",
    "fsdp-bf16",
    "fsdp-bf16-cpu",
    "fsdp-fp16",
    "fsdp-fp16-cpu",
    "fsdp-fp32",
    "fsdp-fp32-cpu",
    "fsdp-fp8",
    "fsdp-fp8-cpu",
    "deepspeed",
    "deepspeed-0",
    "deepspeed-0-bf16",
    "deepspeed-0-fp16",
    "deepspeed-0-fp32",
    "deepspeed-0-fp8",
    "deepspeed-1",
    "deepspeed-1-bf16",
    "deepspeed-1-fp16",
    "deepspeed-1-fp32",
    "deepspeed-1-fp8",
    "deepspeed-2",
    "deepspeed-3",
    *(
        f"deepspeed-{stage}-{precision}{offloads}"
        for stage in (2, 3)
        for precision in ("bf16", "fp16", "fp32", "fp8")
        for offloads in [
            "",
            *(f"-{o}-{p}" for o in ("none", "cpu", "nvme") for p in ("none", "cpu", "nvme")),
        ]
    ),
]


def plan(*argv: str, gpus: int = 0) -> LaunchPlan:
    options = build_parser().parse_args(["launch", *argv])
    return plan_launch(options, cuda_devices=gpus)


def accelerate_sees(launch: LaunchPlan) -> argparse.Namespace:
    """What Accelerate's own parser makes of the options accmt passes it."""
    return launch_command_parser().parse_args(list(launch.accelerate_args))


def test_several_cpu_processes_are_a_multi_process_job_on_hidden_gpus() -> None:
    launch = plan("--cpu", "-N", "2", "train.py", "--epochs", "3", gpus=4)
    seen = accelerate_sees(launch)
    # Not --cpu: 'accelerate launch --cpu --num_processes 2' starts one process.
    assert (seen.multi_gpu, seen.cpu, seen.num_processes) == (True, False, 2)
    assert (seen.training_script, seen.training_script_args) == ("train.py", ["--epochs", "3"])
    assert launch.environment["ACCELERATE_USE_CPU"] == "true"
    assert launch.environment["CUDA_VISIBLE_DEVICES"] == ""
    assert (launch.num_processes, launch.on_cpu) == (2, True)


def test_one_cpu_process_is_a_plain_cpu_run() -> None:
    seen = accelerate_sees(plan("--cpu", "train.py", gpus=2))
    assert (seen.cpu, seen.multi_gpu, seen.num_processes) == (True, False, 1)


def test_without_a_gpu_the_default_strategy_runs_on_cpu_processes() -> None:
    launch = plan("-N", "3", "train.py", gpus=0)
    assert launch.on_cpu
    assert accelerate_sees(launch).multi_gpu
    assert launch.num_processes == 3


def test_the_1x_readme_command_runs_deepspeed_on_eight_gpus() -> None:
    # accmt 1.x's README: accmt launch -N=8 --strat=deepspeed-2-bf16 train.py
    launch = plan("-N=8", "--strat=deepspeed-2-bf16", "train.py", gpus=8)
    seen = accelerate_sees(launch)
    assert (seen.use_deepspeed, seen.zero_stage, seen.mixed_precision) == (True, 2, "bf16")
    assert seen.num_processes == 8
    assert launch.environment["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"


@pytest.mark.parametrize(
    ("argv", "visible"),
    [
        ([], "0,1,2,3"),
        (["-N", "2"], "0,1"),
        (["-N", "2:"], "2,3"),
        (["--num-processes", ":3"], "0,1,2"),
        (["-n", "1,3"], "1,3"),
        (["--gpus", "0,2,3", "-N", "1:"], "2,3"),
        (["--gpus", "available"], "0,1,2,3"),
    ],
)
def test_gpus_are_chosen_by_count_slice_or_index(argv: list[str], visible: str) -> None:
    launch = plan(*argv, "train.py", gpus=4)
    assert launch.environment["CUDA_VISIBLE_DEVICES"] == visible
    seen = accelerate_sees(launch)
    assert seen.num_processes == len(visible.split(","))
    assert seen.multi_gpu


def test_one_gpu_is_a_plain_run() -> None:
    seen = accelerate_sees(plan("-N", "1", "train.py", gpus=4))
    assert (seen.multi_gpu, seen.cpu, seen.num_processes) == (False, False, 1)


def test_a_config_file_is_handed_to_accelerate(tmp_path: Path) -> None:
    config = tmp_path / "my_config.yaml"
    config.write_text("distributed_type: MULTI_GPU\n")
    seen = accelerate_sees(plan("--strat", str(config), "train.py", gpus=2))
    assert seen.config_file == str(config)
    assert seen.num_processes == 2


@pytest.mark.parametrize(
    ("argv", "gpus", "message"),
    [
        (["--strat", "nope"], 2, "unknown strategy"),
        (["--strat", "missing.yaml"], 2, "no such Accelerate config file"),
        (["--strat", "fsdp", "--cpu"], 2, "needs GPUs; with --cpu"),
        (["--strat", "deepspeed-2"], 0, "without a CUDA GPU"),
        (["--cpu", "-N", "0"], 0, "1 or more"),
        (["--cpu", "-N", "2:"], 0, "number of processes"),
        (["-N", "9"], 8, "between 1 and the 8"),
        (["-N", "x"], 8, "number of GPUs or a slice"),
        (["--gpus", "8"], 8, "GPUs 0 to 7"),
        (["--gpus", "a,b"], 8, "indices such as"),
        (["-N", "5:"], 4, "selects no GPU"),
    ],
)
def test_options_that_cannot_run_are_errors_naming_them(
    argv: list[str], gpus: int, message: str
) -> None:
    with pytest.raises(LaunchError, match=message):
        plan(*argv, "train.py", gpus=gpus)


def test_the_strategies_are_accmt_1x_s() -> None:
    assert sorted(STRATEGIES) == sorted(ONE_X_STRATEGIES)
    assert len(STRATEGIES) == 107


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_is_options_accelerate_takes(name: str) -> None:
    strategy = STRATEGIES[name]
    seen = launch_command_parser().parse_args([*strategy.launcher_args, "train.py"])
    assert (seen.multi_gpu, seen.use_fsdp, seen.use_deepspeed) == (
        strategy.family == "ddp",
        strategy.family == "fsdp",
        strategy.family == "deepspeed",
    )
    precision = next((p for p in ("fp16", "bf16", "fp8") if p in name.split("-")), "no")
    assert seen.mixed_precision == precision


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        (
            "deepspeed",
            {"zero_stage": 2, "offload_optimizer_device": "none", "zero3_init_flag": "false"},
        ),
        ("deepspeed-1-fp16", {"zero_stage": 1, "offload_param_device": None}),
        (
            "deepspeed-3",
            {"zero_stage": 3, "zero3_init_flag": "true", "zero3_save_16bit_model": "false"},
        ),
        (
            "deepspeed-3-bf16-cpu-nvme",
            {
                "offload_optimizer_device": "cpu",
                "offload_param_device": "nvme",
                "zero3_save_16bit_model": "true",
            },
        ),
        (
            "fsdp-bf16-cpu",
            {
                "fsdp_offload_params": "true",
                "fsdp_sharding_strategy": "FULL_SHARD",
                "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            },
        ),
        ("fsdp", {"fsdp_offload_params": "false", "fsdp_auto_wrap_policy": "NO_WRAP"}),
    ],
)
def test_strategies_set_what_1x_s_config_files_set(name: str, settings: dict[str, object]) -> None:
    seen = launch_command_parser().parse_args([*STRATEGIES[name].launcher_args, "train.py"])
    assert {key: getattr(seen, key) for key in settings} == settings


def test_strats_lists_every_strategy_with_what_it_sets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["strats"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(STRATEGIES)
    assert any(
        "DeepSpeed ZeRO stage 3, bf16 mixed precision, optimizer offload cpu" in line
        for line in lines
    )
    assert main(["strats", "--fsdp", "--verbose"]) == 0
    shown = capsys.readouterr().out
    assert "fsdp-fp16-cpu" in shown
    assert "deepspeed" not in shown
    assert "ddp" not in shown
    assert "accelerate launch --use_fsdp" in shown


def test_help_documents_the_commands_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    top = capsys.readouterr().out
    assert "launch" in top
    assert "strats" in top
    with pytest.raises(SystemExit):
        main(["launch", "--help"])
    launch = capsys.readouterr().out
    for option in ("-N N, --num-processes N", "-n GPUS, --gpus GPUS", "--strat STRATEGY", "--cpu"):
        assert option in launch


def test_1x_commands_that_are_gone_say_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["get", "runs/model", "--out", "model"]) == 2
    assert "accmt 1.x command" in capsys.readouterr().err
    assert main([]) == 0  # no command: the help


def test_the_docs_show_the_command_line() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "guides" / "accmt.md").read_text()
    for shown in (
        "accmt launch --cpu -N 2",
        "accmt strats",
        "--num-processes",
        "--gpus",
        "--strat",
        "accmt launch --help",
        "accmt --help",
    ):
        assert shown in guide, shown


def test_restarts_meet_on_a_fresh_c10d_store() -> None:
    launch = plan("--cpu", "-N", "2", "--max-restarts", "3", "train.py")
    seen = accelerate_sees(launch)
    assert (seen.max_restarts, seen.rdzv_backend, seen.num_machines) == (3, "c10d", 1)
    assert launch.environment["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert launch.rdzv_endpoint == f"127.0.0.1:{seen.main_process_port}"
    # Without restarts: torch's static rendezvous, as before.
    plain = plan("--cpu", "-N", "2", "train.py")
    assert accelerate_sees(plain).rdzv_backend == "static"
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in plain.environment


def test_several_machines_count_every_process_and_name_machine_0() -> None:
    argv = ["--num-machines", "3", "--machine-rank", "2", "--main-address", "10.0.0.7"]
    seen = accelerate_sees(plan("-N", "4", *argv, "--main-port", "29555", "t.py", gpus=8))
    assert (seen.num_processes, seen.num_machines, seen.machine_rank) == (12, 3, 2)
    assert (seen.main_process_ip, seen.main_process_port) == ("10.0.0.7", 29555)
    assert seen.multi_gpu
    # One process on each of two CPU machines is still a job of several processes.
    cpus = ["--cpu", "--num-machines", "2", *argv[4:], "--main-port", "29555"]
    one_each = accelerate_sees(plan(*cpus, "--machine-rank", "1", "t.py"))
    assert (one_each.multi_gpu, one_each.num_processes) == (True, 2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-machines", "2", "--machine-rank", "2"], "--machine-rank 2: with --num-machines 2"),
        (["--num-machines", "2"], "give --main-address and --main-port"),
    ],
)
def test_machine_options_that_cannot_meet_are_named(argv: list[str], message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        plan("--cpu", *argv, "train.py")


BAD_COUNTS = [["--max-restarts", "-1"], ["--num-machines", "0"], ["--main-port", "70000"]]


@pytest.mark.parametrize("argv", BAD_COUNTS)
def test_bad_counts_are_refused_by_the_parser(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["launch", *argv, "train.py"])


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (subprocess.CalledProcessError(3, "train.py"), 3),
        (subprocess.CalledProcessError(-9, "train.py"), 137),  # SIGKILL, as a shell says it
        (SystemExit(None), 0),
        (SystemExit(2), 2),
        (SystemExit("failed"), 1),
    ],
)
def test_a_launch_that_raised_exits_with_its_workers_status(
    error: BaseException, status: int
) -> None:
    assert exit_status_of(error) == status
    with pytest.raises(ValueError, match="not a worker's"):
        exit_status_of(ValueError("not a worker's"))
