"""What a command loads: run it in a fresh interpreter and list the heavy modules it pulled in
(the start-up paths at every prompt and <TAB> must load none)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pydantic", "rich", "httpx", "anyio", "ruamel.yaml", "filelock")


def loaded_after(*argv: str, heavy: tuple[str, ...] = HEAVY) -> tuple[str, list[str]]:
    """Run ``main(argv)`` in a fresh interpreter; its stdout and which of ``heavy`` it loaded."""
    code = (
        "import sys\n"
        "from backendmgr.cli.main import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', *[m for m in {heavy!r} if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    out, _, loaded = done.stdout.rpartition("LOADED")
    return out, loaded.split()
