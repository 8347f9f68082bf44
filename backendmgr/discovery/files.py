"""Which files in the model folders are model inputs, with nothing but the standard library.

Discovery builds models from these files and the regeneration hash covers them: one walk, so
the two can never disagree about what changed.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["in_folder", "is_model_file", "walk_model_files"]


def is_model_file(name: str) -> bool:
    lowered = name.lower()
    return lowered.endswith((".gguf", ".safetensors")) or name == "config.json"


def in_folder(folder: str) -> str:
    """What a file name is appended to for its path in ``folder``: ``os.path.join``'s result
    for a bare name, made once per folder (the walk, the header pass and the models built
    from them key their maps by these paths: one rule makes them agree)."""
    return folder if folder.endswith(("/", os.sep)) else folder + os.sep


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)  # follows links: HF cache weights are symlinks into blobs/
    except OSError:
        return None


def walk_model_files(
    dirs: list[str],
) -> Iterator[tuple[str, list[tuple[str, str, os.stat_result]]]]:
    """Each folder under ``dirs`` (links followed, cycles and hidden folders skipped) with its
    model files as ``(name, path, stat)``, names sorted."""
    seen: set[tuple[int, int]] = set()
    for top in dirs:
        root = os.path.expanduser(top)
        if not os.path.isdir(root):
            continue
        for folder, subdirs, files in os.walk(root, followlinks=True):
            st = _stat(folder)
            if st is None or (st.st_dev, st.st_ino) in seen:
                subdirs[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
            found = []
            prefix = in_folder(folder)
            for name in sorted(files):
                if not is_model_file(name):
                    continue
                path = prefix + name
                fst = _stat(path)
                if fst is None or not stat.S_ISREG(fst.st_mode):  # what isfile would stat again
                    continue
                found.append((name, path, fst))
            yield folder, found
