"""Everything that writes, verifies, resumes or loads weights: checkpoints (what each
process writes, the manifest and its verifier, durable commits, background writes, the
schedule), a resume's moment on any number of processes, the folder lock, folders moved whole
into place, safetensors state, best models' saving rules, PEFT adapter folders, and
``load_weights``."""

from ._adapters import check_peft_model, is_peft_model, save_adapter
from ._checkpoints import CheckpointOptions, Checkpoints, Start
from ._folder_lock import FolderLock
from ._folders import check_writable, recover_folder, replace_folder
from ._manifest import run_facts
from ._parts import (
    Checkpointable,
    check_checkpointable,
    load_accelerate_state,
    load_objects,
    read_callback_states,
    read_stream_place,
)
from ._resize import resize_warning, restore_lengths, schedule_lengths
from ._run_facts import RunFacts
from ._saving_rules import TRAIN_LOSS, VALID_LOSS, SavingRule, parse_rule
from ._schedule import Unit
from ._tied_weights import tied_weights_unannounced
from ._untouched import untouched_unless
from ._weights import load_weights

__all__ = [
    "TRAIN_LOSS",
    "VALID_LOSS",
    "CheckpointOptions",
    "Checkpointable",
    "Checkpoints",
    "FolderLock",
    "RunFacts",
    "SavingRule",
    "Start",
    "Unit",
    "check_checkpointable",
    "check_peft_model",
    "check_writable",
    "is_peft_model",
    "load_accelerate_state",
    "load_objects",
    "load_weights",
    "parse_rule",
    "read_callback_states",
    "read_stream_place",
    "recover_folder",
    "replace_folder",
    "resize_warning",
    "restore_lengths",
    "run_facts",
    "save_adapter",
    "schedule_lengths",
    "tied_weights_unannounced",
    "untouched_unless",
]
