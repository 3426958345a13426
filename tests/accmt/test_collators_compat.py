"""accmt 1.x's collators import from where 1.x documented them: ``from accmt import ...``
and ``accmt.collate_fns`` (1.x's module), as accmt-collators' own objects."""

from __future__ import annotations

import importlib

import pytest

import accmt_collators

ONE_X_COLLATORS = [
    "DataCollatorForSeq2Seq",
    "DataCollatorWithPadding",
    "DataCollatorForTokenClassification",
    "DataCollatorForLanguageModeling",
    "DataCollatorForWholeWordMask",
    "DataCollatorForPermutationLanguageModeling",
]


@pytest.mark.parametrize("module", ["accmt", "accmt.collate_fns"])
@pytest.mark.parametrize("name", ONE_X_COLLATORS)
def test_one_x_collator_paths_import_accmt_collators(module: str, name: str) -> None:
    imported = importlib.import_module(module)
    assert getattr(imported, name) is getattr(accmt_collators, name)
    assert name in imported.__all__


def test_the_meta_package_exports_every_collators_name() -> None:
    import accmt

    assert set(accmt_collators.__all__) <= set(accmt.__all__)
