"""A package whose names load their module on first use (PEP 562's module ``__getattr__``).

``requests`` and ``api_models`` keep one module per group of operations: making the classes
is most of an import's cost, and a command names its own few. The module is imported by the
import statement's machinery (``__import__``), not :func:`importlib.import_module`, so
``python -X importtime`` lists it under the command that loaded it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

__all__ = ["loader"]


def loader(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: each name of ``where`` from the module it maps to
    (relative to ``package``), kept in the package once loaded so the next look-up is plain."""

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(__import__(f"{package}.{module}", fromlist=[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
