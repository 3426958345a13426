"""What the typing module gives the type checker, without importing typing at run time.

Importing typing (with the modules it pulls in) costs about 20 ms, two thirds of this
package's import budget, and these modules need nothing from it while running: annotations
stay strings (``from __future__ import annotations``) and an overload's stub is simply
replaced by the implementation that follows it. mypy reads any name ``TYPE_CHECKING`` as
true; ruff knows ``overload`` from here as typing's (``typing-modules`` in pyproject.toml).
"""

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import overload as overload
else:

    def overload(func):
        return func
