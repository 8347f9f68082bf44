"""Where the checkout and ``shared/`` (llama-swap's schema and binary) are."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _find_shared() -> Path:
    """``shared/`` beside the checkout; for a local clone, beside the repository it came from."""
    candidates = [ROOT.parent / "shared"]
    origin = subprocess.run(
        ["git", "-C", str(ROOT), "config", "remote.origin.url"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if origin and "://" not in origin and Path(origin).is_dir():
        candidates.append(Path(origin).resolve().parent / "shared")
    for candidate in candidates:
        if (candidate / "llama-swap" / "config-schema.json").is_file():
            return candidate
    return candidates[0]  # tests that need it fail with the path they looked for


SHARED = _find_shared()
