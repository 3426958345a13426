"""The user metrics the guide and the README show run, and give what they promise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "guides" / "metrics.md", ROOT / "packages" / "metrics" / "README.md"]


def own_metric_classes(page: Path) -> dict[str, type]:
    """The classes defined by the code blocks of the page's "Your own metric" section."""
    text = page.read_text()
    section = text[text.index("## Your own metric") : text.index("## torchmetrics")]
    namespace: dict[str, object] = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.DOTALL):
        exec(block, namespace)  # the page's own example code, from this repository
    return {name: value for name, value in namespace.items() if isinstance(value, type)}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.parent.name)
def test_both_styles_of_the_examples_work(page: Path) -> None:
    classes = own_metric_classes(page)
    relative = classes["MeanRelativeError"](num_samples=3)
    relative.add_batch(torch.tensor([1.0, 3.0, 5.0]), torch.tensor([2.0, 2.0, 1.0]))
    relative.add_batch(torch.tensor([7.0]), torch.tensor([2.0]))  # padding
    assert relative.compute() == {"mre": pytest.approx((0.5 + 0.5 + 4.0) / 3, rel=1e-15)}
    median = classes["MedianAbsoluteError"]()
    median.add_batch(torch.tensor([1.0, 3.0, 5.0]), torch.tensor([2.0, 2.0, 1.0]))
    assert median.compute() == {"median_ae": 1.0}
