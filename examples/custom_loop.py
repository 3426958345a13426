"""Your own training loop with accmt's parts: no Trainer, no Accelerate.

    python examples/custom_loop.py

Uses accmt-state (the TrainingState and its file), accmt-callbacks (early stopping, a printed
log) and accmt-metrics (accuracy, the mean loss) around a plain PyTorch loop. The data is made
here: three Gaussian blobs, one per class.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from accmt_callbacks import CallbackHandler, EarlyStopping, PrintLogger
from accmt_metrics import Accuracy, Mean
from accmt_state import TrainingState


def blobs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=generator)
    centres = torch.tensor([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.5]])
    return centres[labels] + 0.8 * torch.randn(n, 2, generator=generator), labels


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.02)
    (x_train, y_train), (x_valid, y_valid) = blobs(512, seed=1), blobs(256, seed=2)
    accuracy, valid_loss = Accuracy(), Mean(name="loss")

    state = TrainingState()
    handler = CallbackHandler([EarlyStopping("accuracy", mode="max", patience=3), PrintLogger()])
    handler.bind(module=model, state=state)
    handler.call("on_fit_start")
    for epoch in range(30):
        state.update(epoch=epoch)
        handler.call("on_epoch_start")
        model.train()
        for batch in torch.randperm(len(y_train)).split(32):
            handler.call("on_before_training_step", batch)
            loss = torch.nn.functional.cross_entropy(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            state.update(
                batch_iteration=state.batch_iteration + 1, global_step=state.global_step + 1
            )
            handler.call("on_after_training_step")
        handler.call("on_evaluation_start")
        model.eval()
        with torch.no_grad():
            logits = model(x_valid)
        accuracy.add_batch(logits.argmax(-1), y_valid)
        valid_loss.update(torch.nn.functional.cross_entropy(logits, y_valid), weight=len(y_valid))
        state.additional_metrics["valid"] = {**accuracy.compute(), **valid_loss.compute()}
        accuracy.reset()
        valid_loss.reset()
        state.evaluations_done += 1
        handler.call("on_evaluation_end")  # EarlyStopping and PrintLogger read the metrics
        handler.call("on_epoch_end")
        if handler.should_stop:
            break
    state.finished = True
    handler.call("on_fit_end")

    folder = Path(tempfile.mkdtemp(prefix="accmt-custom-loop-"))
    state.save(folder / "state.json")
    handler.save_state(folder / "callbacks.json")
    print(f"stopped after epoch {state.epoch}: {handler.stop_reason or 'all epochs done'}")
    print(f"accuracy {state.additional_metrics['valid']['accuracy']:.4f}; state in {folder}")


if __name__ == "__main__":
    main()
