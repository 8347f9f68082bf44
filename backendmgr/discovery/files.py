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

__all__ = ["MAX_WALK_DEPTH", "MAX_WALK_NAMES", "in_folder", "is_model_file", "walk_model_files"]

MAX_WALK_NAMES = 100_000
"""Names (folders and files) one models folder's walk reads before it stops there: a models
folder holding a link to ``/`` (or naming one) would otherwise walk the whole file system on
every command; an HF cache of a hundred models is a few thousand."""
MAX_WALK_DEPTH = 32
"""Folders below a models folder the walk descends; the HF cache's deepest file is five."""
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
"""File systems of the kernel's own (endless through ``/proc/self/root``, slow, or devices):
no model lives there, so the walk never enters a folder on one."""


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


def _pseudo_devices() -> set[int]:
    """The devices of :data:`PSEUDO_ROOTS`, less the root's: where ``/dev`` is no mount of
    its own (a chroot) its device is every file's."""
    root = _stat("/")
    found = {st.st_dev for st in map(_stat, PSEUDO_ROOTS) if st is not None}
    return found - ({root.st_dev} if root is not None else set())


def _above(root: str) -> set[tuple[int, int]]:
    """The folders holding ``root`` (its real path's parents): a link to one is a cycle the
    walk would see only after reading everything else under it (``ln -s / everything``)."""
    found: set[tuple[int, int]] = set()
    folder = os.path.realpath(root)
    while (parent := os.path.dirname(folder)) != folder:
        folder = parent
        st = _stat(folder)
        if st is not None:
            found.add((st.st_dev, st.st_ino))
    return found


def walk_model_files(
    dirs: list[str], stopped: list[str] | None = None
) -> Iterator[tuple[str, list[tuple[str, str, os.stat_result]]]]:
    """Each folder under ``dirs`` (links followed, cycles and hidden folders skipped) with its
    model files as ``(name, path, stat)``, names sorted. Each of ``dirs`` is read to at most
    :data:`MAX_WALK_NAMES` names and :data:`MAX_WALK_DEPTH` levels (a warning where a bound
    stops it: ``stopped`` hears where and why, for the command's warnings), never into
    ``/proc``, ``/sys`` or ``/dev``."""

    def stop(folder: str, why: str) -> None:  # the models found so far still count
        line = f"stopped reading the models folder {folder!r}: {why}"
        if stopped is not None and line not in stopped:  # the depth stop comes per folder
            stopped.append(line)

    seen: set[tuple[int, int]] = set()
    pseudo = _pseudo_devices()
    for top in dirs:
        root = os.path.expanduser(top)
        if not os.path.isdir(root):
            continue
        names, base = 0, root.count(os.sep)
        above = _above(root)  # a link to a folder holding the root is a cycle too
        for folder, subdirs, files in os.walk(root, followlinks=True):
            st = _stat(folder)
            key = None if st is None else (st.st_dev, st.st_ino)
            if key is None or key in seen or key in above or key[0] in pseudo:
                subdirs[:] = []
                continue
            seen.add(key)
            names += len(subdirs) + len(files)
            if folder.count(os.sep) - base >= MAX_WALK_DEPTH and subdirs:
                stop(root, f"folders nested deeper than {MAX_WALK_DEPTH} levels not read")
                subdirs[:] = []
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
            if names > MAX_WALK_NAMES:
                stop(
                    root,
                    f"more than {MAX_WALK_NAMES} files and folders; name the folders of models",
                )
                break
