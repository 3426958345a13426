"""The errors the meta-package itself raises (the 1.x layer raises the packages' own)."""

from __future__ import annotations


class LaunchError(ValueError):
    """The options of ``accmt launch`` do not describe a job that can run; the message says
    which option and why."""
