"""MkDocs hook: drop Sphinx roles from rendered docstrings.

The packages' docstrings name other objects Sphinx-style (``:class:`Trainer```). Markdown keeps
the role as text in front of the code span (``:class:<code>Trainer</code>``); this hook removes
it, leaving the code span.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|obj|exc|data|const):(?=<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub("", html)
