"""What a run reads: the loaders the Trainer builds, curricula and their stages, the plan of
each epoch's loader and batches, batches by token budget, and the checks that no dataset or
loader is empty."""

from ._checks import check_data, check_datasets, check_flattening, check_not_empty
from ._curriculum import Curriculum, RangeCurriculum, RatioCurriculum, StepsCurriculum
from ._epoch_plan import EpochPlan, StageLayout, epoch_batches
from ._loaders import (
    LoaderOptions,
    evaluation_loader,
    length_or_none,
    named_sets,
    samples,
    train_loader,
)
from ._stages import Stages, TrainData, training_data
from ._streams import (
    check_stream,
    keep_places,
    prepare_stream_evaluation,
    reads_from_state,
    stream_place,
    streams_split,
)
from ._token_budget import TokenBudgetBatchSampler, plan_budget

__all__ = [
    "Curriculum",
    "EpochPlan",
    "LoaderOptions",
    "RangeCurriculum",
    "RatioCurriculum",
    "StageLayout",
    "Stages",
    "StepsCurriculum",
    "TokenBudgetBatchSampler",
    "TrainData",
    "check_data",
    "check_datasets",
    "check_flattening",
    "check_not_empty",
    "check_stream",
    "epoch_batches",
    "evaluation_loader",
    "keep_places",
    "length_or_none",
    "named_sets",
    "plan_budget",
    "prepare_stream_evaluation",
    "reads_from_state",
    "samples",
    "stream_place",
    "streams_split",
    "train_loader",
    "training_data",
]
