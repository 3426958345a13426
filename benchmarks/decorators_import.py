"""How long `import accmt_decorators` adds to a bare interpreter, next to `import accelerate`.

./hatchw run python benchmarks/decorators_import.py
"""

from __future__ import annotations

from _timing import interleaved_medians, python_command

REPEATS = 15


def main() -> None:
    medians = interleaved_medians(
        {
            "bare interpreter": python_command("pass"),
            "import accmt_decorators": python_command("import accmt_decorators"),
            "import accelerate": python_command("import accelerate"),
        },
        REPEATS,
    )
    bare = medians["bare interpreter"]
    print(f"median of {REPEATS} interleaved runs each")
    for name, seconds in medians.items():
        print(f"  {name:<26} {seconds * 1000:8.1f} ms   (+{(seconds - bare) * 1000:7.1f} ms)")


if __name__ == "__main__":
    main()
