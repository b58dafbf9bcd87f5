"""The root of every error strata raises on purpose, in the package every other one imports, and
the error of a part used without the optional dependencies it needs."""

from __future__ import annotations

import importlib
from types import ModuleType


class StrataError(Exception):
    """Root of strata's own errors (``sdk.errors`` lists them)."""


class MissingExtraError(StrataError, ImportError):
    """A part of strata was used without the optional dependencies it needs; the message names
    the extra to install."""


def import_extra(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module``, which ``what`` needs and the ``strata[extra]`` extra installs.

    Raises ``MissingExtraError`` in one line naming the extra if it is not installed.

    >>> psycopg = import_extra("psycopg", "postgres", "a postgresql:// store")  # doctest: +SKIP
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name != module and not module.startswith(f"{exc.name}."):
            raise  # the package is there but broken: its own error says more
        raise MissingExtraError(f"{what} needs {module.split('.')[0]}, which is not installed: "
                                f"pip install 'strata[{extra}]'") from None
