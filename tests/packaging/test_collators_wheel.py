"""accmt-collators installs alone, with torch and nothing else, imports, and collates."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._venv import fresh_venv, install, run
from .test_wheels import probe, wheel_of

pytestmark = pytest.mark.packaging

# With a tokenizer of its own (no transformers there), every collator of the package runs.
USE = """
import accmt_collators as c

class Tokenizer:
    pad_token_id, mask_token_id, padding_side, vocab_size = 0, 3, "right", 40
    all_special_ids = (0, 1, 2, 3)

def sample(ids, name):
    extra = {
        "DataCollatorForSeq2Seq": {"labels": ids[1:]},
        "DataCollatorForTokenClassification": {"labels": [0] * len(ids)},
        "DataCollatorForWholeWordMask": {"offset_mapping": [(i, i + 1) for i in range(len(ids))]},
    }
    return {"input_ids": ids, **extra.get(name, {})}

# accmt 1.x's six, built with a tokenizer; the flattening collator takes none.
SIX = [
    "DataCollatorForLanguageModeling", "DataCollatorForPermutationLanguageModeling",
    "DataCollatorForSeq2Seq", "DataCollatorForTokenClassification",
    "DataCollatorForWholeWordMask", "DataCollatorWithPadding",
]
names = sorted(n for n in c.__all__ if n.startswith("DataCollator"))
assert names == sorted(SIX + ["DataCollatorWithFlattening"]), names
for name in SIX:
    options = {"seed": 0} if "Language" in name or "Whole" in name else {}
    if name == "DataCollatorForPermutationLanguageModeling":
        options["pad_to_multiple_of"] = 2
    collate = getattr(c, name)(Tokenizer(), **options)
    batch = collate([sample([1, 7, 8, 9, 2], name), sample([1, 9, 2], name)])
    print(name, tuple(batch["input_ids"].shape))
flat = c.DataCollatorWithFlattening()([sample([1, 7, 8, 9, 2], ""), sample([1, 9, 2], "")])
print("flattened", tuple(flat["input_ids"].shape), flat["use_cache"])
rows = list(c.pack_stream([sample([1, 7, 8, 9, 2], ""), sample([1, 9, 2], "")], 6))
packed = c.DataCollatorWithFlattening(max_length=6)(rows)["input_ids"]
print("packed %dx%d" % tuple(packed.shape))
"""


def test_collators_wheel_installs_with_only_torch_and_collates(
    tmp_path: Path, wheelhouse: Path, torch_site: Path
) -> None:
    stem = "accmt_collators"
    assert len(list(wheelhouse.glob(f"{stem}-2.*-py3-none-any.whl"))) == 1
    assert len(list(wheelhouse.glob(f"{stem}-2.*.tar.gz"))) == 1
    venv = tmp_path / "venv"
    python = fresh_venv(venv, torch_site)  # torch, and nothing else
    before = set(probe_installed(python))
    install(python, wheelhouse, str(wheel_of(wheelhouse, "accmt-collators")))
    found = probe(python, "accmt-collators", "accmt_collators", venv)
    assert set(found["installed"]) - before == {"accmt-collators"}, "it pulled in more than torch"
    assert not {"transformers", "tokenizers"} & set(found["installed"])
    out = run(python, USE)
    assert out.count("(2, ") == 6, out
    assert "flattened (1, 8) False" in out, out
    assert "packed 2x6" in out, out


def probe_installed(python: Path) -> list[str]:
    listing = (
        "import importlib.metadata as m; "
        "print(' '.join(d.metadata['Name'] for d in m.distributions()))"
    )
    return run(python, listing).split()
