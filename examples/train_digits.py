"""Train a digit classifier on scikit-learn's handwritten digits with accmt's Trainer, evaluate
its best model on a held-out test split, and write its predictions.

    python examples/train_digits.py                       # one process (CPU or GPU)
    python examples/train_digits.py --epochs 40           # again: resumes, on to 40 epochs
    python examples/train_digits.py --fresh               # starts over in runs/digits
    accelerate launch --multi_gpu --num_processes 2 examples/train_digits.py --output runs/digits-2
    torchrun --nproc_per_node 2 examples/train_digits.py --output runs/digits-2   # the same

The data ships inside scikit-learn (1,797 8x8 images), so nothing is downloaded. The run
logs to TensorBoard when it is installed, checkpoints every epoch, keeps the best models by
validation accuracy and by validation loss, and resumes by itself if it is interrupted and
started again (or run with more ``--epochs``); ``--fresh`` starts over in the same folder, its
checkpoints moved aside to ``checkpoints.old-<n>`` (nothing is deleted). The Trainer says on
stderr whether the run starts afresh or resumes, and the validation loss and accuracy after
every epoch. Then the best model by validation accuracy is evaluated on the test split, which
training never saw, and its predictions (logits and labels, in the test split's order) are
written to ``<output>/predictions`` (read them back with ``accmt.load_predictions``). A run on two
processes gets its own ``--output``; in a one-process run's folder it resumes that run's
checkpoint (or ``--fresh`` starts over in it). (On a machine without GPUs,
``accelerate launch --cpu`` starts one process whatever ``--num_processes`` says;
``--multi_gpu`` starts them on gloo.)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

from accmt import AcceleratorModule, Accuracy, HyperParameters, Trainer, on_main_process


def split_digits(*fractions: float) -> list[TensorDataset]:
    """The digits, scaled to [0, 1], in consecutive parts of one fixed permutation, each the
    given fraction of them (the last takes what is left)."""
    images, labels = load_digits(return_X_y=True)
    features = torch.tensor(images, dtype=torch.float32) / 16.0
    targets = torch.tensor(labels, dtype=torch.long)
    order = torch.randperm(len(targets), generator=torch.Generator().manual_seed(0))
    ends = [int(len(order) * sum(fractions[: i + 1])) for i in range(len(fractions) - 1)]
    parts = torch.tensor_split(order, ends)
    return [TensorDataset(features[part], targets[part]) for part in parts]


def digits(validation_fraction: float = 0.2) -> tuple[TensorDataset, TensorDataset]:
    """Training and validation splits (the search examples use them)."""
    train, valid = split_digits(1 - validation_fraction, validation_fraction)
    return train, valid


class DigitClassifier(AcceleratorModule):
    def __init__(self) -> None:
        self.model = torch.nn.Sequential(
            torch.nn.Linear(64, 256),
            torch.nn.ReLU(),
            torch.nn.Dropout(0.1),
            torch.nn.Linear(256, 10),
        )

    def training_step(self, batch: Any) -> torch.Tensor:
        images, labels = batch
        return torch.nn.functional.cross_entropy(self.model(images), labels)

    def validation_step(self, key: str, batch: Any) -> dict[str, Any]:
        images, labels = batch
        logits = self.model(images)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        return {"loss": loss, "accuracy": (logits.argmax(dim=-1), labels)}

    def predict_step(self, batch: Any) -> dict[str, torch.Tensor]:
        logits = self.model(batch[0])
        return {"logits": logits, "label": logits.argmax(dim=-1)}


@on_main_process
def report(trainer: Trainer, test: dict[str, float], predictions: Path) -> None:
    state = trainer.state
    accuracy = state.additional_metrics["validation"]["accuracy"]
    print(f"validation accuracy: {accuracy:.4f} (best {state.model_savings['accuracy']:.4f})")
    print(f"epochs: {state.epoch}, optimizer steps: {state.global_step}")
    print(f"TensorBoard logs:   {trainer.logging_options.logging_dir}")
    print(f"checkpoints:        {trainer.model_path / 'checkpoints'}")
    for rule in trainer.saving_rules.values():
        print(f"best model ({rule.name}): {trainer.model_path / rule.folder / 'model.safetensors'}")
    print(f"test accuracy of the best model by accuracy: {test['accuracy']:.4f}")
    print(f"test predictions:   {predictions}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("runs/digits"))
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start over in --output (its checkpoints are moved aside, not deleted)",
    )
    args = parser.parse_args()

    torch.manual_seed(0)
    hps = HyperParameters(
        epochs=args.epochs,
        batch_size=(32, 256),
        optimizer="AdamW",
        optimizer_kwargs={"lr": 3e-3, "weight_decay": 1e-4},
        scheduler="CosineWithWarmup",
        scheduler_kwargs={"warmup_ratio": 0.1},
    )
    trainer = Trainer(
        hps,
        args.output,
        metrics=[Accuracy()],
        checkpoint_every="epoch",
        max_checkpoints=2,
        log_every=10,
        seed=0,
        resume=False if args.fresh else None,  # None: resume when there is a checkpoint
    )
    trainer.register_model_saving("accuracy")
    trainer.register_model_saving("best_valid_loss")
    # 70% to train on, 15% to validate on (and choose the best model by), 15% to test it on.
    train, valid, test = split_digits(0.7, 0.15, 0.15)
    module = DigitClassifier()
    trainer.fit(module, train, valid)
    results = trainer.evaluate(module, test, weights="accuracy")
    predictions = trainer.predict(module, test, output_dir=args.output / "predictions")
    report(trainer, results, predictions)


if __name__ == "__main__":
    main()
