"""Names accmt 1.x had and accmt 2 dropped on purpose: using one fails at once, with an
ImportError that says what to use instead (``from accmt import accelerator``, and
``accmt.accelerator`` alike)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

_NO_GLOBAL_ACCELERATOR = (
    "accmt 2 builds no Accelerator when imported: the Trainer makes one when fit starts "
    "(trainer.accelerator, and self.accelerator in an AcceleratorModule), or make your own "
    "accelerate.Accelerator()"
)
_PROCESS = "use accmt.current_process() (process_index, num_processes, ...), read when called"
_NO_DEBUG = "accmt 2 has no debug or asynchronous-evaluation modes"
_FIND_SPEC = "use importlib.util.find_spec(name) is not None"

TOP_LEVEL: dict[str, str] = {
    "accelerator": _NO_GLOBAL_ACCELERATOR,
    "precision": "use Trainer(mixed_precision=...); the run's is accelerator.mixed_precision",
    "autocast": "use the Accelerator's own: with accelerator.autocast(): ...",
    "autocast_": "use the Accelerator's own: with accelerator.autocast(): ...",
    "allow_tf32": "use torch.backends.cuda.matmul.allow_tf32 = True (or "
    "torch.set_float32_matmul_precision('high')); accmt 2 changes no torch setting on import",
    "IS_CPU": "use accelerator.device.type == 'cpu' (or Trainer(cpu=True) to choose it)",
    "IS_GPU": "use torch.cuda.is_available(), or accelerator.device.type == 'cuda'",
    "tqdm": "use tqdm itself (from tqdm.auto import tqdm); the Trainer shows its own progress "
    "bar (Trainer(progress_bar=...))",
    "is_tf32_supported": "use torch.cuda.is_available() and "
    "torch.cuda.get_device_capability() >= (8, 0)",
    "is_transformers_available": _FIND_SPEC,
}

_GATHER = "use Accelerate's accelerator.gather, gather_for_metrics or gather_object"
_SPLIT = "use accelerator.split_between_processes(...)"

UTILS: dict[str, str] = {
    **dict.fromkeys(("MASTER_PROCESS", "LAST_PROCESS", "RANK", "WORLD_SIZE"), _PROCESS),
    **dict.fromkeys(
        ("DEBUG_MODE", "DEBUG_TIMINGS", "ASYNC", "ASYNC_HASH", "ASYNC_TRAIN_GROUP", "DIST_HASH"),
        _NO_DEBUG,
    ),
    **dict.fromkeys(
        (
            "gather",
            "gather_object",
            "all_gather_dictionary",
            "gather_and_drop_duplicates",
            "gather_into_single_process",
        ),
        _GATHER,
    ),
    **dict.fromkeys(("prepare", "prepare_array", "prepare_dataframe"), _SPLIT),
    "IS_CPU": TOP_LEVEL["IS_CPU"],
    "IS_GPU": TOP_LEVEL["IS_GPU"],
    "rprint": "print under @accmt.on_main_process (or @on_process(rank))",
    "dist_breakpoint": "accmt 2 has no distributed breakpoint",
    "global_randint": "draw it on the main process and share it with "
    "accelerate.utils.broadcast_object_list",
    "print_gpu_users_by_device": "run nvidia-smi",
    "get_time_prefix": "use time.strftime, or logging's own time stamps",
    "SEED": "use accmt.utils.get_seed()",
    "is_deepspeed_available": "use accelerate.utils.is_deepspeed_available()",
    "is_pandas_available": _FIND_SPEC,
    "is_tf32_supported": TOP_LEVEL["is_tf32_supported"],
    "is_transformers_available": _FIND_SPEC,
}


def dropped(module: str, names: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` that raises, for each dropped name, an ImportError naming its
    replacement (an ImportError, not an AttributeError, so that ``from module import name``
    shows this message), and an AttributeError for any other missing name."""

    def __getattr__(name: str) -> object:
        if name in names:
            raise ImportError(
                f"{module}.{name} was accmt 1.x's and is not in accmt 2: {names[name]} "
                "(see 'Migrating from accmt 1.x' in the documentation)",
                name=name,
            )
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
