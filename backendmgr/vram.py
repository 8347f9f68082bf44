"""The GPU's total memory, read once per process (SPEC §11.2): the utilisation's denominator."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["probe_card_gb"]


def probe_card_gb(environ: Mapping[str, str] | None = None) -> float | None:
    """``BACKENDMGR_VRAM_GB``, else the first NVIDIA card via nvidia-smi, else None. A set
    value that is no size (``abc``, ``0``, ``nan``, ``inf``) is an error, not ignored: every
    model would be sized against it, or silently against the probe instead."""
    env = os.environ if environ is None else environ
    override = env.get("BACKENDMGR_VRAM_GB", "").strip()
    if override:
        try:
            value = float(override)
        except ValueError:
            value = 0.0
        from .config.models import MAX_GB  # loaded already: sizing reads the settings

        if not 0 < value <= MAX_GB:  # NaN fails this too; 1e999 is inf
            from .errors import ConfigError

            raise ConfigError(
                f'BACKENDMGR_VRAM_GB "{override[:40]}" is not a size in GiB '
                f"(more than 0, at most {MAX_GB})"
            )
        return value
    import shutil  # after the override: a set size costs no look-up (nor its archive modules)

    if shutil.which("nvidia-smi") is None:
        return None
    import subprocess  # only where there is an nvidia-smi to run: a set size or none needs none

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        return float(out.strip().splitlines()[0]) / 1024
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
