"""The wiring (issues 30 and 34): each service made on first use, so a command imports only the
services it touches, and the collaborators they share made once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from backendmgr.config.paths import Paths
from backendmgr.manager.context import Context
from backendmgr.manager.services import Services

ELSEWHERE = ("bisect", "canary", "bench", "measure", "swap", "sync", "doctor", "maintenance")


def test_an_install_imports_only_the_services_it_uses(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from backendmgr.config.paths import Paths\n"
        "from backendmgr.manager import Manager\n"
        "m = Manager(Paths.resolve(config=sys.argv[1], home=sys.argv[2]))\n"
        "m._s.installer\n"
        "print(' '.join(n for n in sys.modules if n.startswith('backendmgr.manager.')))\n"
    )
    argv = [sys.executable, "-c", script, str(tmp_path / "c.yaml"), str(tmp_path / "h")]
    loaded = set(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split())
    assert "backendmgr.manager.install" in loaded
    assert loaded.isdisjoint(f"backendmgr.manager.{name}" for name in ELSEWHERE)


def test_shared_collaborators_are_made_once(tmp_path: Path) -> None:
    s = Services(Context(Paths.resolve(config=tmp_path / "c.yaml", home=tmp_path / "h")))
    assert s.installer.probe is s.releases.probe is s.probe is s.site.probe
    assert s.models.site is s.measure.site is s.bisect.site
    assert s.models.tuned is s.measure.tuned
    assert s.models.benched is s.bench.store
    assert s.installer is s.bisect.installer is s.canary.installer
