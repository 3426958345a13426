"""Install every third-party dependency the packages declare, at its declared minimum.

pip has no "lowest versions" resolution, so this reads the minimums where they are declared,
the ``[project] dependencies`` of packages/*/pyproject.toml (with the extras of one package that
another requires: accmt's ``accmt-trainer[streams]``), and installs ``name==minimum`` for
each (the highest minimum where several packages name the same dependency), letting pip move
whatever they depend on to fit; then ``pip check`` must find the environment consistent. The
workspace's own packages are left alone, and so is torch: it stays the 2.13.0 CPU wheel that
hatch.toml pins, as any other torch build is gigabytes.

``hatch run minimums:test`` runs this, then the unit tests. ``python .ci/minimums.py --print``
only prints the pins.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
KEPT_AS_PINNED = {"torch"}
REFERENCE_ONLY = ("transformers",)
# The operators whose version is the lowest one allowed.
LOWER_BOUNDS = (">=", "~=", "==")


def declared(root: Path = ROOT) -> list[tuple[str, Requirement]]:
    """Every ``[project] dependencies`` entry of every package, with the file declaring it; and
    where one requires an extra of another (``accmt-trainer[streams]``), that extra's entries,
    as the other declares them (``packages/trainer/pyproject.toml [streams]``)."""
    projects = {}
    for pyproject in sorted(root.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        projects[canonicalize_name(project["name"])] = (str(pyproject.relative_to(root)), project)
    found = []
    for relative, project in projects.values():
        found += [(relative, Requirement(entry)) for entry in project.get("dependencies", [])]
    for _, requirement in found:  # grows as extras bring more, extras of extras included
        where, member = projects.get(canonicalize_name(requirement.name), ("", {}))
        for extra in sorted(requirement.extras):
            entries = member.get("optional-dependencies", {}).get(extra, [])
            found += [(f"{where} [{extra}]", Requirement(entry)) for entry in entries]
    return found


def members(root: Path = ROOT) -> set[str]:
    """The workspace's own distributions."""
    return {
        canonicalize_name(tomllib.loads(pyproject.read_text())["project"]["name"])
        for pyproject in root.glob("packages/*/pyproject.toml")
    }


def minimum(requirement: Requirement, where: str) -> Version:
    lows = [
        Version(spec.version) for spec in requirement.specifier if spec.operator in LOWER_BOUNDS
    ]
    if not lows:
        raise SystemExit(f"{where}: {requirement} declares no minimum version (>=, ~= or ==)")
    return max(lows)


def pins(root: Path = ROOT) -> list[str]:
    """``name[extras]==minimum`` for every third-party dependency, sorted by name."""
    own = members(root) | KEPT_AS_PINNED
    lowest: dict[str, tuple[Version, Requirement]] = {}
    for where, requirement in declared(root):
        name = canonicalize_name(requirement.name)
        if name in own or (
            requirement.marker and not requirement.marker.evaluate(default_environment())
        ):
            continue
        version = minimum(requirement, where)
        if name not in lowest or version > lowest[name][0]:
            lowest[name] = (version, requirement)
    return [pin(requirement, version) for _, (version, requirement) in sorted(lowest.items())]


def pin(requirement: Requirement, version: Version) -> str:
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{requirement.name}{extras}=={version}"


def main() -> None:
    wanted = pins()
    print("declared minimums:", " ".join(wanted), flush=True)
    if "--print" in sys.argv[1:]:
        return
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "install", "--quiet", *wanted], check=True)
    # transformers is a test-only reference and accmt-trainer's optional hf extra, not a
    # declared dependency; its releases need a newer safetensors than accmt's minimum.
    subprocess.run([*pip, "uninstall", "--quiet", "--yes", *REFERENCE_ONLY], check=True)
    subprocess.run([*pip, "check"], check=True)


if __name__ == "__main__":
    main()
