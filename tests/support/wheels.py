"""Real wheels of a toy server, for venv installs from a local folder (PIP_FIND_LINKS)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

# A user manifest for the toy server: a pypi-sourced backend like vllm.
TOY_MANIFEST = """\
id: toy
name: Toy server
kind: vllm
source: {type: pypi, package: toy-server}
exe: {default: bin/toy-server, windows: Scripts/toy-server.exe}
variants:
  - {id: cpu, label: CPU, platforms: [linux-x64, linux-arm64]}
"""


def make_wheel(
    folder: Path,
    version: str,
    *,
    padding: int = 0,
    entry: str = "main",
    extra: dict[str, str] | None = None,
    requires_python: str | None = None,
    sleep: float = 0,
    requires: tuple[str, ...] = (),
) -> Path:
    """A real wheel of ``toy-server`` whose console script prints its own version; ``padding``
    bytes make it large, ``entry`` names the script's function (a missing one installs but does
    not run), ``extra`` adds files (path → text), ``requires_python`` goes into its METADATA,
    ``sleep`` seconds pass before the script answers (vLLM's slow ``--version``), and
    ``requires`` are its dependencies (``Requires-Dist``)."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"toy_server-{version}.dist-info"
    wants = f"Requires-Python: {requires_python}\n" if requires_python else ""
    wants += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        "toy_server/__init__.py": (
            f'import time\n\n__version__ = "{version}"\n\n\ndef main() -> None:\n'
            f"    time.sleep({sleep!r})\n"
            '    print(f"toy-server {__version__}")\n'
        ),
        "toy_server/blob.txt": "x" * padding,
        **(extra or {}),
        f"{dist}/METADATA": (
            f"Metadata-Version: 2.1\nName: toy-server\nVersion: {version}\n{wants}"
        ),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[console_scripts]\ntoy-server = toy_server:{entry}\n",
    }
    return _write_wheel(folder / f"toy_server-{version}-py3-none-any.whl", dist, files)


def make_plain_wheel(folder: Path, name: str, version: str) -> Path:
    """A real wheel of a one-module package ``name`` (a stand-in for torch and the like)."""
    folder.mkdir(parents=True, exist_ok=True)
    module = name.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'__version__ = "{version}"\n',
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    return _write_wheel(folder / f"{module}-{version}-py3-none-any.whl", dist, files)


def _write_wheel(path: Path, dist: str, files: dict[str, str]) -> Path:
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return path
