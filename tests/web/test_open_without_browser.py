"""Issue 33 (7): ``serve --open`` where no browser can be found says so, in one warning line,
and serves on."""

from __future__ import annotations

from pathlib import Path

from tests.support import Setup
from tests.support.web import interrupted, serve_process, serving


def test_open_without_a_browser_is_one_warning(setup: Setup, tmp_path: Path) -> None:
    empty = tmp_path / "no-browsers"  # PATH without xdg-open, www-browser, lynx …
    empty.mkdir()
    proc, line = serve_process(
        "--open", BROWSER="", DISPLAY="", WAYLAND_DISPLAY="", PATH=str(empty)
    )
    try:
        serving(line.split()[3].split("?")[0], proc)
    finally:
        _, err = interrupted(proc)
    assert proc.returncode == 0, err
    warnings = [x for x in err.splitlines() if x.startswith("warning:")]
    assert warnings == [
        "warning: --open: no browser found to open the page (set BROWSER, or open the address "
        "above yourself)"
    ], err
