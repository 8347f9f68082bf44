"""The web tests' fixtures (``tests/support/web.py``); they need the web extra."""

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed")
pytest.importorskip("uvicorn", reason="the web extra is not installed")

from tests.support.web import client, server  # noqa: F401  (fixtures)
