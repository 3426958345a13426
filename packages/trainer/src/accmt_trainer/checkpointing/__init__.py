"""Everything that writes, verifies, resumes or loads weights: checkpoints (what each
process writes, the manifest and its verifier, durable commits, background writes, the
schedule), a resume's moment on any number of processes, the folder lock, folders moved whole
into place, safetensors state, best models' saving rules, and ``load_weights``."""

from ._checkpoints import CheckpointOptions, Checkpoints, Start
from ._dcp import read_metadata
from ._folder_lock import FolderLock
from ._folders import check_writable, recover_folder, replace_folder
from ._manifest import check_compatible, inventory, run_facts, verify
from ._parts import (
    Checkpointable,
    check_checkpointable,
    load_accelerate_state,
    load_objects,
    read_callback_states,
)
from ._resize import (
    check_position,
    fitting_counts,
    merge_losses,
    position_at,
    ranks_taken_over,
    refusal,
    resize_warning,
    resized_facts,
    restore_lengths,
    schedule_lengths,
    seen_here,
)
from ._run_facts import DIGEST, MANIFEST, Manifest, RunFacts, read_manifest
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
    "Manifest",
    "RunFacts",
    "SavingRule",
    "Start",
    "Unit",
    "check_checkpointable",
    "check_compatible",
    "check_position",
    "check_writable",
    "fitting_counts",
    "inventory",
    "load_accelerate_state",
    "load_objects",
    "load_weights",
    "merge_losses",
    "parse_checkpoint_every",
    "parse_rule",
    "position_at",
    "ranks_taken_over",
    "read_callback_states",
    "read_manifest",
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
