"""Python code run as where ``ruamel.yaml.clib`` does not install: its module blocked, so
that ``YAML(typ="safe")`` takes ruamel's pure parser and emitter."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

BLOCK = "import sys; sys.modules['_ruamel_yaml'] = None\n"  # as where it does not install


def without_clib(code: str, given: Any = None) -> Any:
    """What ``code`` prints as JSON, run in a fresh Python without the C extension, with
    ``given`` as JSON on its standard input."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCK + code],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
