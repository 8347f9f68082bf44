"""The web tests' fixtures (``tests/support/web.py``); they need the web extra."""

from collections.abc import Iterator

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed")
pytest.importorskip("uvicorn", reason="the web extra is not installed")

from tests.measure.test_bench import b, one  # noqa: F401  (builds of set speeds)
from tests.support.web import Running, client, server  # noqa: F401  (fixtures)


@pytest.fixture
def running(request: pytest.FixtureRequest) -> Iterator[Running]:
    """A served app over ``b``'s builds (b100 fast and activated, b200 30 % slower): the
    canary's tests (issue 32)."""
    request.getfixturevalue("b")
    served = Running().start()
    try:
        yield served
    finally:
        served.stop()
