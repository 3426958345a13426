"""The documentation site builds with ``mkdocs build --strict`` and no warning, and its API
reference shows the packages' public names."""

from __future__ import annotations

import html
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["decorators", "state", "callbacks", "metrics", "trainer", "collators", "search"]

# A few names each API page must document, with the anchor mkdocstrings gives them.
EXPECTED = {
    "decorators": ["on_main_process", "current_process", "main_process_first"],
    "state": ["TrainingState", "StateError"],
    "callbacks": ["Callback", "CallbackHandler", "EarlyStopping"],
    "metrics": ["Metric", "Accuracy", "F1"],
    "trainer": ["Trainer", "AcceleratorModule", "HyperParameters"],
    "collators": ["DataCollatorWithPadding", "DataCollatorForLanguageModeling", "CollatorError"],
    "search": ["HyperParameterSearch", "SearchResult", "SearchError"],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site_dir = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"mkdocs build --strict exited {done.returncode}:\n{output}"
    warnings = [line for line in output.splitlines() if "WARNING" in line]
    assert warnings == [], "mkdocs build warned:\n" + "\n".join(warnings)
    return site_dir


def page(site: Path, path: str) -> str:
    return (site / path / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("package", PACKAGES)
def test_api_page_documents_every_public_name(site: Path, package: str) -> None:
    html = page(site, f"api/{package}")
    module = importlib.import_module(f"accmt_{package}")
    missing = [name for name in module.__all__ if f'id="accmt_{package}.{name}"' not in html]
    assert missing == [], f"api/{package} does not document {missing}"
    for name in EXPECTED[package]:
        assert f'id="accmt_{package}.{name}"' in html


def test_meta_package_page_links_every_exported_name(site: Path) -> None:
    import accmt

    html = page(site, "api/accmt")
    missing = [
        name
        for name in accmt.__all__
        if name != "__version__" and f"<code>{name}</code>" not in html
    ]
    assert missing == [], f"api/accmt does not list {missing}"
    # Cross-references into the packages' pages resolved (a broken one fails the build).
    assert 'href="../trainer/#accmt_trainer.Trainer"' in html


def test_the_trainer_s_integration_module_is_documented(site: Path) -> None:
    """``accmt_trainer.integration``'s own names are documented there; the user-facing ones it
    re-exports, with ``accmt_trainer``."""
    from accmt_trainer import integration

    html = page(site, "api/trainer")
    documented = [
        name
        for name in integration.__all__
        if f'id="accmt_trainer.integration.{name}"' in html or f'id="accmt_trainer.{name}"' in html
    ]
    assert documented == integration.__all__


@pytest.mark.parametrize(
    "path",
    [
        "",
        "migration",
        *(f"guides/{name}" for name in [*PACKAGES, "accmt", "language-model"]),
    ],
)
def test_every_page_is_built(site: Path, path: str) -> None:
    assert "<h1" in page(site, path)


def test_the_language_model_guide_shows_the_example_whole(site: Path) -> None:
    shown = page(site, "guides/language-model")
    script = (ROOT / "examples" / "train_lm.py").read_text(encoding="utf-8")
    # Every line of the script, from the file itself (not a copy that could drift from it).
    missing = [
        line
        for line in script.splitlines()
        if line.strip() and html.escape(line, quote=False) not in shown
    ]
    assert missing == []
    assert "--8&lt;--" not in shown


def test_docstrings_render_without_sphinx_roles(site: Path) -> None:
    for package in PACKAGES:
        html = page(site, f"api/{package}")
        assert ":class:" not in html
        assert ":meth:" not in html
