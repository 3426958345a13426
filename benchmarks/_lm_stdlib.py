"""``benchmarks/lm.py --corpus stdlib``: useful tokens per second of a small GPT-2 trained on
real, variable-length documents, batched in the ways that waste fewer pad tokens, under accmt
and HF Trainer.

    ./hatchw run python benchmarks/lm.py --corpus stdlib --rounds 3   # 4 minutes on 2 idle cores
    ./hatchw run python benchmarks/lm.py --corpus stdlib --quick    # a smoke run

The documents are the standard library's top-level functions and classes in a byte-level BPE
of 4096 trained on them here (``_stdlib_corpus.py``), cut to the model's 512 positions,
shuffled once (seed 0); each round trains one epoch over the first ``--documents`` of them
(default 320). The model is transformers' ``GPT2LMHeadModel`` from a config, randomly
initialised (seed 0): 2 layers, 128 wide, heads 32 wide, 512 positions, dropout off,
``use_cache=False``, sdpa attention. The loss is token-weighted: the cross-entropy summed over
the labelled next tokens of a step divided by their number (accmt's ``num_items``, HF's
``num_items_in_batch`` through ``compute_loss_func``), by one function outside the model for
every run; AdamW (lr 3e-4, no weight decay, fused), one micro-batch a step.

The runs, each in its own process (lm.py's design: rounds interleaved, the order rotating):

- accmt padded: batches of 8 documents in the shuffled order, padded to their longest.
- accmt budget: ``TokenBudgetBatchSampler(lengths, 4096, packed=False)``: batches of
  documents of like length whose longest times their number stays within 4096, padded.
- accmt flattened: ``DataCollatorWithFlattening()``, the 8 documents of a batch in one row,
  ``position_ids`` restarting per document (the batch says ``use_cache=False``).
- accmt packed: ``DataCollatorWithFlattening(max_length=512)`` with
  ``TokenBudgetBatchSampler(lengths, 4096, packed=True)``: documents summing to at most 4096
  tokens, laid best-fit into rows of 512.
- accmt budget 2048, accmt packed 2048: the same two with half the budget (``max_tokens`` is
  the user's knob: on a CPU a smaller step computes each position faster).
- HF padded: HF Trainer, batches of 8 in the same order, ``DataCollatorForLanguageModeling(
  mlm=False)`` padding them (a ``PreTrainedTokenizerFast`` of the same BPE).
- HF grouped: the same with ``train_sampling_strategy="group_by_length"`` (HF's
  ``LengthGroupedSampler``: batches of like length, to pad less).
- HF flattened: transformers' ``DataCollatorWithFlattening()``, the 8 documents of a batch in
  one row.

The same documents in every run; the fixed batches of 8 (padded and flattened, under both
frameworks) in the same order, so those four runs do the same sums and their losses agree.
A useful token is one whose next-token prediction is trained (a label not -100 after the
shift: a document of n tokens holds n - 1). A round's figure is the useful tokens of the steps
after ``--warmup`` over their time; the table shows the median over the rounds, the positions
the model computes per useful token (padding and a row's free tail included), the loss per
useful token over the whole epoch (the first round's), and the process's peak RSS.

Exactness: a flattened row keeps its documents apart in transformers only when the forward
builds no KV cache. transformers' ``DataCollatorWithFlattening`` puts no ``use_cache`` in its
batch, so with GPT-2's default config (``use_cache=True``) HF Trainer's forward lets every
document attend to those before it. Every run here sets ``config.use_cache=False``, so the
comparison is fair and exact; a check before the rounds measures, on the first batch, each
document's logits in a flattened row against the document alone, with ``use_cache`` at
GPT-2's default and with it off, for both collators, and prints it.

Time: the one full run so far, with the 2 cores loaded (load average 5) and ``--rounds 3``,
took 18 minutes; on idle cores with the default 5 rounds it is not yet timed.

``--device cuda`` synchronises the GPU at each step's end; it is written for a GPU but was not
run on one yet. Not in run_all.py (lm.py is not).

Goal (issue 41): accmt's best at least 2x accmt padded, and ahead of HF Trainer's best.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    import torch

HERE = Path(__file__).parent
LENGTH = 512  # the model's positions; documents are cut to it, packed rows are this long
BATCH = 8
MAX_TOKENS = BATCH * LENGTH  # the token budget of a step: what a full padded batch computes
# Half of it: on a CPU a smaller step computes each position faster (see the README), and
# max_tokens is the user's knob, so accmt's token-budget runs are shown at both.
HALF_BUDGET = MAX_TOKENS // 2
WIDTH = 128
LAYERS = 2
HEAD_WIDTH = 32
LR = 3e-4
IGNORED = -100
RUNS = {
    "accmt padded": "batches of 8, padded to their longest",
    "accmt budget": f"TokenBudgetBatchSampler({MAX_TOKENS}), padded",
    f"accmt budget {HALF_BUDGET}": f"TokenBudgetBatchSampler({HALF_BUDGET}), padded",
    "accmt flattened": "DataCollatorWithFlattening(): 8 documents in one row",
    "accmt packed": f"DataCollatorWithFlattening(max_length={LENGTH}) + "
    f"TokenBudgetBatchSampler({MAX_TOKENS}, packed=True)",
    f"accmt packed {HALF_BUDGET}": f"DataCollatorWithFlattening(max_length={LENGTH}) + "
    f"TokenBudgetBatchSampler({HALF_BUDGET}, packed=True)",
    "HF padded": "batches of 8, DataCollatorForLanguageModeling(mlm=False)",
    "HF grouped": 'the same, train_sampling_strategy="group_by_length"',
    "HF flattened": "transformers' DataCollatorWithFlattening(): 8 documents in one row",
}


@dataclass(frozen=True)
class Job:
    """What one child process trains, each round."""

    run: str
    corpus: str  # the folder holding documents.json and tokenizer.json
    warmup: int
    threads: int
    device: str


# ---------------------------------------------------------------------- data, model, loss


def write_corpus(folder: Path, count: int) -> dict[str, Any]:
    """Tokenize the standard library into ``folder`` (the children read it): the first
    ``count`` documents after a seeded shuffle. Returns what the parent prints of them."""
    from _stdlib_corpus import token_documents

    began = time.perf_counter()
    every, trained = token_documents(LENGTH)
    random.Random(0).shuffle(every)
    chosen = every[:count]
    (folder / "documents.json").write_text(json.dumps(chosen))
    (folder / "lengths.json").write_text(json.dumps([len(ids) for ids in every]))
    trained.save(str(folder / "tokenizer.json"))
    lengths = sorted(len(ids) for ids in every)
    return {
        "documents": len(every),
        "median": statistics.median(lengths),
        "p90": lengths[int(0.9 * len(lengths))],
        "chosen": len(chosen),
        "chosen_tokens": sum(len(ids) for ids in chosen),
        "seconds": time.perf_counter() - began,
    }


def read_documents(job: Job) -> list[dict[str, Any]]:
    ids: list[list[int]] = json.loads((Path(job.corpus) / "documents.json").read_text())
    return [{"input_ids": each} for each in ids]


def hf_tokenizer(job: Job) -> Any:
    from _stdlib_corpus import PAD
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_file=str(Path(job.corpus) / "tokenizer.json"), pad_token=PAD
    )


def gpt2(use_cache: bool = False) -> torch.nn.Module:
    import torch
    from _stdlib_corpus import VOCABULARY
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCABULARY,
        n_positions=LENGTH,
        n_embd=WIDTH,
        n_layer=LAYERS,
        n_head=WIDTH // HEAD_WIDTH,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        use_cache=use_cache,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    return GPT2LMHeadModel(config)


def model_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """A batch minus what the model takes no keyword for."""
    from accmt_collators import DOCUMENT_SPANS

    return {key: value for key, value in batch.items() if key not in ("labels", DOCUMENT_SPANS)}


class Meter:
    """The loss every run uses, and what each optimizer step trained and when it ended."""

    def __init__(self, device: str) -> None:
        self.cuda = device == "cuda"
        self.began = time.perf_counter()
        self.stamps: list[float] = []
        self.useful: list[int] = []  # per optimizer step
        self.positions: list[int] = []
        self.pending = (0, 0)
        self.loss_sum = 0.0

    def summed(self, logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
        """The cross-entropy summed over the labelled next tokens, and their number."""
        import torch

        targets = labels[:, 1:]
        summed = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1).float(),
            targets.flatten(),
            ignore_index=IGNORED,
            reduction="sum",
        )
        count = int(targets.ne(IGNORED).sum())
        self.loss_sum += float(summed.detach())
        useful, positions = self.pending
        self.pending = (useful + count, positions + labels.numel())
        return summed, count

    def tick(self) -> None:
        if self.cuda:  # a step is its device work
            import torch

            torch.cuda.synchronize()
        self.stamps.append(time.perf_counter())
        self.useful.append(self.pending[0])
        self.positions.append(self.pending[1])
        self.pending = (0, 0)

    def answer(self, warmup: int) -> dict[str, float]:
        if len(self.stamps) <= warmup:
            raise RuntimeError(
                f"an epoch made {len(self.stamps)} optimizer steps, not more than the "
                f"{warmup} of warm-up: give more --documents"
            )
        seconds = self.stamps[-1] - (self.stamps[warmup - 1] if warmup else self.began)
        timed = self.useful[warmup:]
        return {
            "tokens_s": sum(timed) / seconds,
            "step_ms": seconds / len(timed) * 1e3,
            "steps": len(self.stamps),
            "positions_per_useful": sum(self.positions) / sum(self.useful),
            "loss": self.loss_sum / sum(self.useful),
        }


# ------------------------------------------------------------------------------ the loops


def accmt(job: Job, data: list[dict[str, Any]]) -> Meter:
    from lm import Collate, reset_accelerate

    from accmt_callbacks import Callback
    from accmt_collators import DataCollatorWithFlattening
    from accmt_trainer import AcceleratorModule, HyperParameters, TokenBudgetBatchSampler, Trainer

    meter = Meter(job.device)
    lengths = [len(sample["input_ids"]) for sample in data]
    collate: Any = Collate(None)
    sampler = None
    budget = HALF_BUDGET if job.run.endswith(f" {HALF_BUDGET}") else MAX_TOKENS
    if job.run.startswith("accmt budget"):
        sampler = TokenBudgetBatchSampler(lengths, budget, packed=False, seed=0)
    elif job.run == "accmt flattened":
        collate = DataCollatorWithFlattening()
    elif job.run.startswith("accmt packed"):
        collate = DataCollatorWithFlattening(max_length=LENGTH)
        sampler = TokenBudgetBatchSampler(lengths, budget, packed=True, seed=0)

    class LanguageModel(AcceleratorModule):
        def __init__(self) -> None:
            self.model = gpt2()

        def training_step(self, batch: Any) -> Any:
            logits = self.model(**model_inputs(batch)).logits
            summed, count = meter.summed(logits, batch["labels"])
            return {"loss": summed, "num_items": count}

    class StepClock(Callback):
        def __init__(self) -> None:
            self.seen = 0

        def on_after_training_step(self) -> None:
            assert self.state is not None
            if self.state.global_step != self.seen:
                self.seen = self.state.global_step
                meter.tick()

    hps = HyperParameters(
        epochs=1,
        batch_size=BATCH,
        optimizer="AdamW",
        optimizer_kwargs={"lr": LR, "weight_decay": 0.0, "fused": True},
    )
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(
            hps,
            folder,
            cpu=job.device == "cpu",
            collate_fn=collate,
            batch_sampler=sampler,
            shuffle_train=False,
            log_with=None,
            log_every=500,
            progress_bar=False,
            checkpoint_every=None,
            disable_model_saving=True,
            eval_when_finish=False,
            callbacks=[StepClock()],
            seed=0,
        )
        trainer.fit(LanguageModel(), data)  # type: ignore[arg-type]  # a list is a map-style dataset
    reset_accelerate()
    return meter


def hf_trainer(job: Job, data: list[dict[str, Any]]) -> Meter:
    import transformers
    from lm import reset_accelerate
    from transformers import Trainer, TrainerCallback, TrainingArguments

    meter = Meter(job.device)

    class StepClock(TrainerCallback):
        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            meter.tick()

    def compute_loss(outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> Any:
        return meter.summed(outputs.logits, labels)[0] / num_items_in_batch

    if job.run == "HF flattened":
        collate: Any = transformers.DataCollatorWithFlattening()
    else:
        collate = transformers.DataCollatorForLanguageModeling(hf_tokenizer(job), mlm=False)
    with tempfile.TemporaryDirectory() as folder:
        arguments = TrainingArguments(
            output_dir=folder,
            per_device_train_batch_size=BATCH,
            num_train_epochs=1,
            learning_rate=LR,
            weight_decay=0.0,
            optim="adamw_torch_fused",
            lr_scheduler_type="constant",
            max_grad_norm=0.0,
            train_sampling_strategy="group_by_length" if job.run == "HF grouped" else "sequential",
            use_cpu=job.device == "cpu",
            report_to="none",
            save_strategy="no",
            eval_strategy="no",
            logging_steps=500,
            disable_tqdm=True,
            seed=0,
        )
        trainer = Trainer(
            model=gpt2(),
            args=arguments,
            train_dataset=data,  # type: ignore[arg-type]  # a list is a map-style dataset
            data_collator=collate,
            compute_loss_func=compute_loss,
            callbacks=[StepClock()],
        )
        trainer.loss_is_scaled_for_ga = True  # divided by num_items_in_batch, the step's count
        trainer.train()
    reset_accelerate()
    return meter


def exactness(job: Job) -> dict[str, float]:
    """Each document's logits in a flattened row against the document alone, on the first
    batch of 8: the largest difference, per collator and ``use_cache`` setting."""
    import torch
    import transformers

    from accmt_collators import DataCollatorWithFlattening

    data = read_documents(job)[:BATCH]
    found: dict[str, float] = {}
    collators = {
        "accmt": DataCollatorWithFlattening(),
        "HF": transformers.DataCollatorWithFlattening(),
    }
    for use_cache in (True, False):
        model = gpt2(use_cache).train()
        with torch.no_grad():
            alone = [model(input_ids=torch.tensor([s["input_ids"]])).logits[0] for s in data]
            for name, collate in collators.items():
                batch = collate(data)
                row = model(**model_inputs(batch)).logits[0]
                starts = [0, *itertools.accumulate(len(s["input_ids"]) for s in data)]
                worst = max(
                    float((row[start : start + len(each)] - each).abs().max())
                    for start, each in zip(starts, alone, strict=False)
                )
                found[f"{name}, use_cache={use_cache}"] = worst
                found[f"{name} batch use_cache, use_cache={use_cache}"] = float(
                    "use_cache" in batch
                )
    return found | at_scale(job)


def at_scale(job: Job) -> dict[str, float]:
    """Positions computed per useful token over the whole corpus (not only the documents a
    round trains), as each way of batching lays it out."""
    import torch
    from transformers.trainer_pt_utils import get_length_grouped_indices

    from accmt_collators._flattening import best_fit_decreasing
    from accmt_trainer import TokenBudgetBatchSampler

    lengths: list[int] = json.loads((Path(job.corpus) / "lengths.json").read_text())
    useful = sum(lengths) - len(lengths)
    in_order = list(range(len(lengths)))
    grouped = get_length_grouped_indices(lengths, BATCH, generator=torch.Generator().manual_seed(0))
    budget, packed = (
        TokenBudgetBatchSampler(lengths, MAX_TOKENS, packed=flag, seed=0) for flag in (False, True)
    )

    def padded(order: list[int]) -> int:
        return sum(
            max(lengths[i] for i in order[at : at + BATCH]) * len(order[at : at + BATCH])
            for at in range(0, len(order), BATCH)
        )

    rows = sum(len(best_fit_decreasing([lengths[i] for i in b], LENGTH)) for b in packed)
    return {
        "scale padded": padded(in_order) / useful,
        "scale budget": sum(budget.cost(b) for b in budget) / useful,
        "scale packed": rows * LENGTH / useful,
        "scale HF grouped": padded(grouped) / useful,
    }


# --------------------------------------------------------------------------- the child


def child(job: Job) -> None:
    """Train a round on each ``round`` line of stdin; answer on the real stdout in JSON."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the frameworks print goes to stderr, away from the answers
    import logging
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(job.threads)
    if job.run == "exactness":
        answers.write(json.dumps(exactness(job)) + "\n")
        return
    data = read_documents(job)
    loop = accmt if job.run.startswith("accmt") else hf_trainer
    answers.write("ready\n")
    for line in sys.stdin:
        if line.strip() != "round":
            break
        answers.write(json.dumps(loop(job, data).answer(job.warmup)) + "\n")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    answers.write(json.dumps({"peak_rss_mib": peak_mib}) + "\n")


class Child:
    """A child process training one run, round by round."""

    def __init__(self, job: Job, environment: dict[str, str]) -> None:
        self.job = job
        # Lives as long as the child: its tail is shown if the child fails; closed at close().
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        command = [sys.executable, __file__, "--child", json.dumps(asdict(job))]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={**os.environ, **environment, "PYTHONPATH": path_with(HERE)},
        )

    def answer(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            self.log.seek(0)
            raise RuntimeError(f"{self.job.run} failed:\n{self.log.read()[-3000:]}")
        return line.strip()

    def ask(self, command: str) -> dict[str, float]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer: dict[str, float] = json.loads(self.answer())
        return answer

    def close(self) -> float:
        peak = self.ask("end")["peak_rss_mib"]
        self.process.wait()
        self.log.close()
        return peak


def exactness_of(job: Job) -> dict[str, float]:
    """:func:`exactness`, in a child process of its own (the parent imports no torch)."""
    command = [sys.executable, __file__, "--child", json.dumps(asdict(job))]
    environment = {**os.environ, "PYTHONPATH": path_with(HERE)}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the exactness check failed:\n{done.stderr[-3000:]}")
    found: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return found


def path_with(folder: Path) -> str:
    """PYTHONPATH with ``folder`` first, so that a child imports lm and _stdlib_corpus."""
    return os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))


# -------------------------------------------------------------------------- the parent


@dataclass
class Result:
    rounds: list[dict[str, float]]
    peak_rss_mib: float

    @property
    def tokens_s(self) -> float:
        return statistics.median(each["tokens_s"] for each in self.rounds)

    @property
    def spread(self) -> float:
        speeds = [each["tokens_s"] for each in self.rounds]
        return max(speeds) / min(speeds) - 1


def measure(jobs: list[Job], rounds: int, environment: dict[str, str]) -> dict[str, Result]:
    """Each job in its own process; the rounds interleaved, their order rotating."""
    children = [Child(job, environment) for job in jobs]
    for each in children:
        if each.answer() != "ready":
            raise RuntimeError(f"{each.job.run} did not start")
    answers: dict[str, list[dict[str, float]]] = {job.run: [] for job in jobs}
    for turn in range(rounds):
        print(f" {turn + 1}", end="", file=sys.stderr, flush=True)
        for each in children[turn % len(children) :] + children[: turn % len(children)]:
            answers[each.job.run].append(each.ask("round"))
    return {each.job.run: Result(answers[each.job.run], each.close()) for each in children}


def table(results: dict[str, Result]) -> Iterator[str]:
    floor = results["accmt padded"].tokens_s
    yield (
        "| run | batches | steps | ms/step | useful tokens/s | x accmt padded | positions per "
        "useful token | loss per useful token | peak RSS |"
    )
    yield "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for run, result in results.items():
        first = result.rounds[0]
        step = statistics.median(each["step_ms"] for each in result.rounds)
        yield (
            f"| {run} | {RUNS[run]} | {first['steps']:.0f} | {step:.1f} | "
            f"{result.tokens_s:,.0f} | {result.tokens_s / floor:.2f} | "
            f"{first['positions_per_useful']:.2f} | {first['loss']:.5f} | "
            f"{result.peak_rss_mib:,.0f} MiB |"
        )


def verdicts(
    results: dict[str, Result], checked: dict[str, float], documents: int
) -> Iterator[str]:
    speed = {run: result.tokens_s for run, result in results.items()}
    ours = max((run for run in speed if run.startswith("accmt")), key=speed.__getitem__)
    theirs = max((run for run in speed if run.startswith("HF")), key=speed.__getitem__)
    twice = speed[ours] / speed["accmt padded"]
    ahead = speed[ours] / speed[theirs]
    padded = results["accmt padded"].rounds[0]["positions_per_useful"]
    best_positions = min(result.rounds[0]["positions_per_useful"] for result in results.values())
    yield (
        f"- goal 1, accmt's best at least 2x accmt padded: {ours} {twice:.2f}x: "
        f"{'met' if twice >= 2 else 'missed'}"
        + (
            ""
            if twice >= 2
            else f" (the floor: padded batches compute {padded:.2f} positions per useful token "
            f"and the leanest run {best_positions:.2f}, so removing padding can give at most "
            f"{padded / best_positions:.2f}x where a position costs the same)"
        )
    )
    yield (
        f"- goal 2, accmt's best ahead of HF Trainer's best: {ours} {ahead:.2f}x {theirs}: "
        f"{'met' if ahead > 1 else 'missed'}"
    )
    loose = max(results.values(), key=lambda r: r.spread)
    yield (
        f"- the widest spread of a run's rounds: {loose.spread:.1%} "
        f"({next(run for run, r in results.items() if r is loose)})"
    )
    same = [
        results[run].rounds[0]["loss"]
        for run in ("accmt padded", "accmt flattened", "HF padded", "HF flattened")
    ]
    yield (
        "- the four runs on the same batches of 8 (padded and flattened, accmt and HF) end with "
        f"losses per useful token {min(same):.5f}-{max(same):.5f}: the same sums (exact "
        "flattening); the others batch differently"
    )
    yield (
        "- on the whole corpus, positions computed per useful token: padded "
        f"{checked['scale padded']:.2f}, budget {checked['scale budget']:.2f}, packed "
        f"{checked['scale packed']:.2f}, HF grouped {checked['scale HF grouped']:.2f} (HF's "
        "LengthGroupedSampler sorts within mega-batches of min(documents / 32, 50) batches: "
        f"{max(1, min(documents // (BATCH * 4), 50))} batches of 8 with the {documents} "
        "documents a round trains here)"
    )
    for name in ("accmt", "HF"):
        carries = checked[f"{name} batch use_cache, use_cache=True"] > 0
        yield (
            f"- exactness, {name}'s DataCollatorWithFlattening (its batch "
            f"{'says use_cache=False' if carries else 'has no use_cache'}): documents in a "
            f"flattened row against each alone, largest logit difference "
            f"{checked[f'{name}, use_cache=True']:.2g} with GPT-2's default config "
            f"(use_cache=True), {checked[f'{name}, use_cache=False']:.2g} with use_cache=False"
            + (
                ""
                if carries or checked[f"{name}, use_cache=True"] < 1e-4
                else ": with the default config its documents attend across (HF Trainer's "
                "forward builds a KV cache); every run here sets config.use_cache=False, so "
                "HF's flattened run above is exact and fair"
            )
        )


def main(args: argparse.Namespace) -> None:
    """Run the stdlib benchmark with lm.py's parsed arguments (its --rounds, --threads,
    --device, --steady-malloc, --quick, and --documents, --warmup)."""
    from lm import STEADY_MALLOC

    documents, rounds, warmup = args.documents, args.rounds, 2
    if args.quick:
        documents, rounds, warmup = 16, 1, 0
    started = time.perf_counter()
    environment = STEADY_MALLOC if args.steady_malloc else {}
    with tempfile.TemporaryDirectory() as folder:
        print("... the corpus", end="", file=sys.stderr, flush=True)
        corpus = write_corpus(Path(folder), documents)
        print(f" ({corpus['seconds']:.0f} s); the exactness check", end="", file=sys.stderr)
        checked = exactness_of(Job("exactness", folder, warmup, args.threads, args.device))
        print("; rounds", end="", file=sys.stderr, flush=True)
        jobs = [Job(run, folder, warmup, args.threads, args.device) for run in RUNS]
        results = measure(jobs, rounds, environment)
        print(f" ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    print(
        f"GPT-2 ({LAYERS} layers, {WIDTH} wide, {LENGTH} positions, vocabulary 4096, random "
        f"init, use_cache=False, sdpa) on the standard library's top-level functions and "
        f"classes ({corpus['documents']:,} documents in a byte-level BPE of 4096 trained here: "
        f"median {corpus['median']:.0f} tokens, 90th percentile {corpus['p90']} after the cut "
        f"to {LENGTH}); each round one epoch over the same {corpus['chosen']} documents "
        f"({corpus['chosen_tokens']:,} tokens), token-weighted loss, AdamW; {args.device}, "
        f"{args.threads} threads; each run in its own process; the median over {rounds} "
        f"interleaved rounds of the useful tokens/s of the steps after {warmup} of warm-up; "
        f"glibc's allocator: {'steady' if args.steady_malloc else 'its defaults'}"
    )
    print()
    for line in table(results):
        print(line)
    print()
    for line in verdicts(results, checked, documents):
        print(line)
    print(f"- took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--child"]:
        raise SystemExit("run benchmarks/lm.py --corpus stdlib")
    child(Job(**json.loads(sys.argv[2])))
