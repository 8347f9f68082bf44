from __future__ import annotations

import subprocess
import sys

import backendmgr


def test_public_names_are_pinned() -> None:
    assert backendmgr.__all__ == [
        "BackendmgrError",
        "Cancelled",
        "ConfigError",
        "InstallFailed",
        "InvalidInput",
        "Manager",
        "NetworkError",
        "NotFound",
        "Outcome",
        "Paths",
        "Refused",
        "UnsafeArchive",
        "VerificationError",
        "__version__",
    ]
    for name in backendmgr.__all__:
        assert getattr(backendmgr, name) is not None


def test_errors_share_one_base() -> None:
    for name in backendmgr.__all__:
        obj = getattr(backendmgr, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, backendmgr.BackendmgrError)


def test_help_does_not_import_heavy_modules() -> None:
    code = (
        "import sys\n"
        "from backendmgr.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('pydantic', 'httpx', 'rich', 'ruamel.yaml') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_python_dash_m_and_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "backendmgr", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"backendmgr {backendmgr.__version__}"
