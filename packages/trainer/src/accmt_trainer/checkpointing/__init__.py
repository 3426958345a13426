"""Everything that writes, verifies, resumes or loads weights: checkpoints (what each
process writes, the manifest and its verifier, durable commits, background writes, the
schedule), a resume's moment on any number of processes, the folder lock, folders moved whole
into place, safetensors state, best models' saving rules, and ``load_weights``."""

from ._checkpoints import CheckpointOptions, Checkpoints
from ._dcp import read_metadata
from ._folder_lock import FolderLock
from ._folders import check_writable, recover_folder, replace_folder
from ._manifest import DIGEST, MANIFEST, check_compatible, inventory, run_facts, verify
from ._parts import Checkpointable, check_checkpointable
from ._resize import (
    Start,
    check_position,
    counters_at,
    fitting_counts,
    merge_parts,
    parts_of,
    processes,
    refusal,
    resize_warning,
    resized_facts,
    restore_lengths,
    schedule_lengths,
    seen_here,
)
from ._saving_rules import TRAIN_LOSS, VALID_LOSS, SavingRule, parse_rule
from ._schedule import CheckpointSchedule, Unit, parse_checkpoint_every
from ._tied_weights import tied_weights_unannounced
from ._untouched import untouched_unless
from ._weights import load_weights

__all__ = [
    "DIGEST",
    "MANIFEST",
    "TRAIN_LOSS",
    "VALID_LOSS",
    "CheckpointOptions",
    "CheckpointSchedule",
    "Checkpointable",
    "Checkpoints",
    "FolderLock",
    "SavingRule",
    "Start",
    "Unit",
    "check_checkpointable",
    "check_compatible",
    "check_position",
    "check_writable",
    "counters_at",
    "fitting_counts",
    "inventory",
    "load_weights",
    "merge_parts",
    "parse_checkpoint_every",
    "parse_rule",
    "parts_of",
    "processes",
    "read_metadata",
    "recover_folder",
    "refusal",
    "replace_folder",
    "resize_warning",
    "resized_facts",
    "restore_lengths",
    "run_facts",
    "schedule_lengths",
    "seen_here",
    "tied_weights_unannounced",
    "untouched_unless",
    "verify",
]
