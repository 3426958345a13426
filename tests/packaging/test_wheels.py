"""Each package's wheel installs alone, with only its declared dependencies, and imports.

A package that secretly needs a sibling it does not declare, or torch, fails here: the fresh
environment holds nothing but the wheel and what its metadata asks for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ._venv import fresh_venv, install, run, run_script

pytestmark = pytest.mark.packaging

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Packages that must not load torch, each installed into an environment of its own.
LIGHT = [
    ("accmt-decorators", "accmt_decorators"),
    ("accmt-state", "accmt_state"),
    ("accmt-callbacks", "accmt_callbacks"),
]
# Packages on torch. Each one's dependencies include the one before it, so installing them in
# this order into one environment checks each exactly as a fresh environment would, while
# paying for one torch install instead of three.
ON_TORCH = [
    ("accmt-metrics", "accmt_metrics"),
    ("accmt-trainer", "accmt_trainer"),
    ("accmt", "accmt"),
]

PROBE = """
import importlib, importlib.metadata, json, sys
module = importlib.import_module({module!r})
missing = [name for name in module.__all__ if not hasattr(module, name)]
print(json.dumps({{
    "file": module.__file__,
    "version": importlib.metadata.version({dist!r}),
    "missing": missing,
    "heavy": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "accelerate")),
    "installed": sorted(d.metadata["Name"] for d in importlib.metadata.distributions()),
}}))
"""


def wheel_of(wheelhouse: Path, dist: str) -> Path:
    (found,) = wheelhouse.glob(dist.replace("-", "_") + "-*.whl")
    return found


def probe(python: Path, dist: str, module: str, venv: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(run(python, PROBE.format(module=module, dist=dist)))
    assert found["file"].startswith(str(venv)), found["file"]
    assert found["version"].startswith("2."), f"{dist}: an accmt 1.x from the index was imported"
    assert found["missing"] == [], f"{dist}: __all__ names what the module lacks"
    return found


@pytest.mark.parametrize(("dist", "module"), LIGHT)
def test_light_wheel_installs_alone_without_torch(
    tmp_path: Path, wheelhouse: Path, dist: str, module: str
) -> None:
    python = fresh_venv(tmp_path / "venv")
    install(python, wheelhouse, str(wheel_of(wheelhouse, dist)))
    found = probe(python, dist, module, tmp_path / "venv")
    assert found["heavy"] == [], f"importing {module} loaded {found['heavy']}"
    assert "torch" not in found["installed"]


def test_every_package_has_a_wheel_and_an_sdist(wheelhouse: Path) -> None:
    for dist, _ in [*LIGHT, *ON_TORCH]:
        stem = dist.replace("-", "_")
        assert len(list(wheelhouse.glob(f"{stem}-2.*-py3-none-any.whl"))) == 1, dist
        assert len(list(wheelhouse.glob(f"{stem}-2.*.tar.gz"))) == 1, dist


def test_decorators_only_runs_its_example(tmp_path: Path, wheelhouse: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    install(python, wheelhouse, str(wheel_of(wheelhouse, "accmt-decorators")))
    out = run_script(python, EXAMPLES / "decorators_demo.py")
    assert "[main process] 1 process(es), identity from single" in out


def test_torch_wheels_install_with_only_their_dependencies_and_run_their_examples(
    tmp_path: Path, wheelhouse: Path, torch_site: Path
) -> None:
    venv = tmp_path / "venv"
    python = fresh_venv(venv, torch_site)  # torch, and nothing else
    wheels = {dist: str(wheel_of(wheelhouse, dist)) for dist, _ in [*LIGHT, *ON_TORCH]}

    install(python, wheelhouse, wheels["accmt-metrics"])
    probe(python, "accmt-metrics", "accmt_metrics", venv)
    # The second way: a custom loop on state + callbacks + metrics, without the trainer.
    install(python, wheelhouse, wheels["accmt-state"], wheels["accmt-callbacks"])
    out = run_script(python, EXAMPLES / "custom_loop.py")
    assert "accuracy 0.9" in out, out
    listing = "import importlib.metadata as m; print([d.name for d in m.distributions()])"
    assert "accelerate" not in run(python, listing)

    install(python, wheelhouse, wheels["accmt-trainer"])
    found = probe(python, "accmt-trainer", "accmt_trainer", venv)
    assert "torchdata" not in found["installed"]  # its streams extra, not required
    # The third way: the meta-package (with what its streams need), and the classifier example
    # on real data.
    install(python, wheelhouse, wheels["accmt"], "scikit-learn")
    assert "torchdata" in probe(python, "accmt", "accmt", venv)["installed"]
    out = run_script(
        python, EXAMPLES / "train_digits.py", "--epochs", "2", "--output", str(tmp_path / "digits")
    )
    assert "validation accuracy: 0." in out, out
    assert (tmp_path / "digits" / "accuracy" / "model.safetensors").is_file()
