"""The page in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``):
install a build from the mirror and watch its bar reach 100 %, activate another build, pin
a model and see the generated config change; add a registry row through the form, move ★ to
it, verify the model on it (a real server program the test writes) and remove the row. The
screenshot is kept as a test artifact (``BACKENDMGR_SCREENSHOT=path`` to choose where;
docs/serve.png was taken so)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backendmgr.mirror import MirrorServer
from tests.support import (
    Entry,
    Setup,
    llama_entries,
    make_tar,
    publish,
    publish_llama,
)
from tests.support.standins import SERVER_STANDIN
from tests.support.web import Running

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
VULKAN = "llama-{tag}-bin-ubuntu-vulkan-x64.tar.gz"
SCREENSHOT = os.environ.get("BACKENDMGR_SCREENSHOT")  # read before the fixtures clear it

# read at import, before the fixtures clear BACKENDMGR_*: scripts/test honours it too
NO_BROWSER = os.environ.get("BACKENDMGR_NO_BROWSER", "").strip().lower() in (
    "1",
    "true",
    "yes",
    "on",
)

pytestmark = [
    pytest.mark.skipif(NO_BROWSER, reason="BACKENDMGR_NO_BROWSER is set: no browser test"),
    pytest.mark.skipif(
        not (CHROMIUM and DRIVER),
        reason="headless Chromium is not installed (Debian: apt-get install chromium "
        "chromium-driver; scripts/test does this when run as root)",
    ),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1500,1500",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
    ):
        options.add_argument(arg)
    # the driver named explicitly: Selenium must not look for (or fetch) one of its own
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(DRIVER)))
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: Any, check: Callable[[Any], Any], what: str, timeout: float = 20) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(check, message=what)


def text_of(driver: Any, css: str) -> str:
    """Read in one step in the page: a refresh may replace the element between two."""
    text = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';", css
    )
    return str(text)


def retry(action: Callable[[], Any]) -> Any:
    """Run a click or a choice again when a refresh replaced the element under it."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(20):
        try:
            return action()
        except StaleElementReferenceException:
            continue
    return action()


def test_the_page_installs_activates_pins_and_shows_the_config(
    mirror: MirrorServer,
    mirror_root: Path,
    setup: Setup,
    browser: Any,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    blob = Entry("build/bin/blob.bin", os.urandom(2 << 20))
    publish(
        mirror_root,
        "ggml-org/llama.cpp",
        "b100",
        {VULKAN.format(tag="b100"): make_tar([*llama_entries("b100"), blob])},
        published_at="2026-11-20T00:00:00Z",
    )
    publish_llama(mirror_root, "b90", published_at="2026-11-01T00:00:00Z")
    installed = subprocess.run(
        [sys.executable, "-m", "backendmgr", "install", "llama-server", "b90"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    mirror.throttle = 2 << 20  # about a second: the bar moves
    running = Running().start()
    try:
        # the address serve prints: it sets the cookie and leaves the token out of the bar
        browser.get(running.page_url)
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "body[data-loaded]"), "the page")
        assert browser.current_url == running.url + "/"
        assert running.secret not in browser.execute_script("return document.cookie")
        assert "llama-server@b90-vulkan" in text_of(browser, "#builds")
        assert "qwen3-8b-q4_k_m" in text_of(browser, "#models")

        # install b100 (the suggested variant for this GPU is vulkan) and watch the bar
        def start() -> None:
            row = browser.find_element(By.CSS_SELECTOR, 'tr[data-component="llama-server"]')
            variant = Select(row.find_element(By.NAME, "variant"))
            assert variant.first_selected_option.text == "vulkan"
            version = row.find_element(By.NAME, "version")
            version.clear()
            version.send_keys("b100")
            row.find_element(By.CSS_SELECTOR, "button[data-install]").click()

        retry(start)
        bar = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "progress[data-job]"), "bar")
        seen: list[int] = []

        def finished(d: Any) -> bool:
            seen.append(int(float(bar[0].get_attribute("value") or 0)))
            return "installed llama-server@b100-vulkan" in text_of(d, "#jobs")

        wait(browser, finished, "the install to finish", timeout=40)
        assert int(float(bar[0].get_attribute("value"))) == 100
        assert "100 %" in text_of(browser, "#jobs")
        assert any(0 < v < 100 for v in seen), seen  # it moved on the way, not only at the end
        new_row = 'tr[data-build="llama-server@b100-vulkan"]'
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, new_row), "the new build")

        # activate the new build (b90 stayed activated)
        retry(
            lambda: browser.find_element(
                By.CSS_SELECTOR, 'tr[data-build="llama-server@b100-vulkan"] button[data-activate]'
            ).click()
        )
        wait(
            browser,
            lambda d: (
                text_of(d, 'tr[data-build="llama-server@b100-vulkan"] td:nth-child(2)') == "yes"
            ),
            "b100 shown as activated",
        )
        assert text_of(browser, 'tr[data-build="llama-server@b90-vulkan"] td:nth-child(2)') == ""

        # pin the model to the old build: the generated config follows
        before = text_of(browser, "#generated-text")
        retry(
            lambda: Select(
                browser.find_element(By.CSS_SELECTOR, 'select[data-pin="qwen3-8b-q4_k_m"]')
            ).select_by_value("llama-server@b90-vulkan")
        )
        assert 'pinned to "llama-server@b90-vulkan"' not in before
        wait(
            browser,
            lambda d: 'pinned to "llama-server@b90-vulkan"' in text_of(d, "#generated-text"),
            "the config to follow the pin",
        )
        after = text_of(browser, "#generated-text")
        assert "b90-vulkan/build/bin/llama-server" in after
        assert "llama-server@b90-vulkan" in text_of(browser, '[data-backend="qwen3-8b-q4_k_m"]')
        assert "valid" in text_of(browser, "#generated")

        # an error shows where the action was taken, in the CLI's words
        def set_bad() -> None:
            box = browser.find_element(By.CSS_SELECTOR, 'input[data-set="qwen3-8b-q4_k_m"]')
            box.clear()
            box.send_keys("ctz=5")
            box.find_element(By.XPATH, "following-sibling::button").click()

        retry(set_bad)
        model_row = '[data-model="qwen3-8b-q4_k_m"]'
        wait(browser, lambda d: "error: unknown key" in text_of(d, model_row), "the error")
        assert "ctx" in text_of(browser, model_row)

        registry_and_verify(browser, setup, tmp_path)
    finally:
        running.stop()


FORM_SAID = '[data-note="add-row"]'  # what the add-a-row form said, beside it


def stars(driver: Any) -> list[str]:
    """The rows that show ★, read in one step."""
    found = driver.execute_script(
        "return [...document.querySelectorAll('#backends tr[data-row]')]"
        ".filter((r) => r.querySelector('td.star').textContent === '★')"
        ".map((r) => r.dataset.row);"
    )
    return list(found)


def add_row(driver: Any, row_id: str, path: Path, name: str = "") -> None:
    """Fill the add-a-row form and submit it (the form is not rebuilt by a refresh)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    form = driver.find_element(By.CSS_SELECTOR, "form#add-row")
    for field, value in (("id", row_id), ("path", str(path)), ("name", name)):
        box = form.find_element(By.NAME, field)
        box.clear()
        box.send_keys(value)
    Select(form.find_element(By.NAME, "kind")).select_by_value("llama")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def registry_and_verify(driver: Any, setup: Setup, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    def click(css: str) -> None:
        retry(lambda: driver.find_element(By.CSS_SELECTOR, css).click())

    # build rows are never ★ nor removable here; the installer's row is not removable either
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-default="llama-server@b90-vulkan"]')
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-remove="llama-server@b90-vulkan"]')
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-remove="llama-server"]')
    kinds = driver.execute_script(
        "return [...document.querySelectorAll('#add-row select[name=kind] option')]"
        ".map((o) => o.value);"
    )
    assert "llama" in kinds and "custom" in kinds, kinds

    # ★ the hand-made row of the user's config
    click('button[data-default="llama-src"]')
    wait(driver, lambda d: stars(d) == ["llama-src"], "★ on llama-src")

    # a new row through the form, pointing at a real executable
    exe = tmp_path / "local" / "llama-server"
    exe.parent.mkdir()
    exe.write_text(f"#!{sys.executable}\n{SERVER_STANDIN}")
    exe.chmod(0o755)
    add_row(driver, "llama-local", exe, "my local build")
    wait(driver, lambda d: 'added backend row "llama-local"' in text_of(d, FORM_SAID), "add")
    wait(driver, lambda d: str(exe) in text_of(d, 'tr[data-row="llama-local"]'), "the new row")
    assert "my local build" in text_of(driver, 'tr[data-row="llama-local"]')
    assert stars(driver) == ["llama-src"]  # a new row takes ★ only when asked to
    assert "id: llama-local" in setup.config.read_text()

    # errors beside the form, in the CLI's words, and nothing changes
    before = setup.config.read_text()
    add_row(driver, "llama-local", exe)
    wait(
        driver,
        lambda d: 'error: a backend row "llama-local" already exists' in text_of(d, FORM_SAID),
        "the duplicate refused",
    )
    plain = tmp_path / "local" / "notes.txt"
    plain.write_text("not a program\n")
    add_row(driver, "llama-bad", plain)
    wait(
        driver,
        lambda d: (
            f"error: {plain} is not executable; give the executable, or add --force"
            in text_of(d, FORM_SAID)
        ),
        "the bad path refused",
    )
    assert setup.config.read_text() == before
    for field in ("id", "path"):  # the refused text stays in the form until the user clears it
        box = driver.find_element(By.CSS_SELECTOR, f'#add-row [name="{field}"]')
        assert box.get_attribute("value")
        box.clear()
    assert not driver.find_elements(By.CSS_SELECTOR, 'tr[data-row="llama-bad"]')

    # ★ moves to the new row
    click('button[data-default="llama-local"]')
    wait(driver, lambda d: stars(d) == ["llama-local"], "★ to move to llama-local")
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-default="llama-local"]')

    # verify the model where it is pinned (b90's stand-in prints its version and exits)
    model = "qwen3-8b-q4_k_m"
    assert text_of(driver, f'[data-verification="{model}"]') == "not verified"
    click(f'button[data-verify="{model}"]')
    said = f'[data-note="verify:{model}"]'
    wait(driver, lambda d: text_of(d, said).startswith("failed: "), "verify to fail", timeout=40)
    wait(
        driver,
        lambda d: "verified today: failed" in text_of(d, f'[data-verification="{model}"]'),
        "the failure kept",
    )

    # pinned to the new row it serves: ok, and the row says so
    retry(
        lambda: Select(
            driver.find_element(By.CSS_SELECTOR, f'select[data-pin="{model}"]')
        ).select_by_value("llama-local")
    )
    wait(driver, lambda d: text_of(d, f'[data-backend="{model}"]') == "llama-local", "pinned")
    wait(driver, lambda d: str(exe) in text_of(d, "#generated-text"), "the config to follow")
    click(f'button[data-verify="{model}"]')
    wait(driver, lambda d: text_of(d, said).startswith("ok in "), "verify to pass", timeout=40)
    # both checks ran as jobs, each followed to its end by the page
    verifies = driver.execute_async_script(
        "const done = arguments[0];"
        "fetch('/api/jobs').then((r) => r.json())"
        ".then((jobs) => done(jobs.filter((j) => j.kind === 'verify')"
        ".map((j) => [j.state, j.result.results[0].ok])));"
    )
    assert verifies == [["done", False], ["done", True]], verifies
    wait(
        driver,
        lambda d: "verified today: ok in" in text_of(d, f'[data-verification="{model}"]'),
        "the result kept",
    )

    # the screenshot: builds, ★, a pinned and verified model, the generated config
    shot = Path(SCREENSHOT or tmp_path / "serve.png")
    driver.execute_script("window.scrollTo(0, 0)")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    frame = driver.execute_script("return window.outerHeight - window.innerHeight")
    driver.set_window_size(1500, min(int(height), 2400) + int(frame))  # the whole page
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000

    # remove the row: it goes, ★ with it, and the stale pin is named
    click('button[data-remove="llama-local"]')
    wait(
        driver,
        lambda d: not d.find_elements(By.CSS_SELECTOR, 'tr[data-row="llama-local"]'),
        "the row to go",
    )
    wait(driver, lambda d: 'removed backend row "llama-local"' in text_of(d, "#backends"), "said")
    assert f'pins to "llama-local" are now stale and fall back: {model}' in text_of(
        driver, '[data-note="registry"]'
    )
    assert stars(driver) == []
    assert "id: llama-local" not in setup.config.read_text()


def test_the_page_opened_by_open_loads_with_its_cookie(setup: Setup, browser: Any) -> None:
    """``--open`` starts the browser on a local file that forwards to the printed address:
    a navigation begun by a file is cross-site, and the Strict cookie it sets must still
    reach the page (a plain redirect would land on the "needs the secret" note)."""
    from selenium.webdriver.common.by import By

    from backendmgr.cli.commands.serve import redirect_file

    running = Running().start()
    try:
        page = redirect_file(running.page_url)
        browser.get(page.as_uri())
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "body[data-loaded]"), "the page")
        assert browser.current_url == running.url + "/"
        assert "qwen3-8b-q4_k_m" in text_of(browser, "#models")
    finally:
        running.stop()
        shutil.rmtree(page.parent)
