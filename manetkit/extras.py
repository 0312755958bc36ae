"""Optional dependencies, by the extra that installs them (pyproject.toml).

A laptop that runs only the daemon and the proxy installs ``pip install manetkit``: no
numpy, matplotlib or scapy. The lab needs numpy (``manetkit[lab]``); plots and the
experiments need matplotlib (``manetkit[experiments]``). Where one is missing, the command
that needs it says which extra to install instead of a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from manetkit.errors import UserError

# top-level module -> the extra that installs it
EXTRA_OF = {"numpy": "lab", "aiohttp": "lab", "matplotlib": "experiments", "scapy": "test"}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that would have provided the module ``exc`` is about, if any."""
    return EXTRA_OF.get((exc.name or "").split(".")[0])


def explain(exc: ModuleNotFoundError, what: str) -> UserError:
    """A UserError for ``what`` failing on a module of an extra (or the original error)."""
    extra = missing_extra(exc)
    if extra is None:
        raise exc
    return UserError(
        f"{what} needs {exc.name.split('.')[0]}, which this installation does not have: "
        f"pip install 'manetkit[{extra}]'"
    )


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` or raise a UserError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise explain(exc, what) from None
