"""The canary form on the page in a real headless Chromium (issue 32): it starts the canary as
a job, draws both builds' prompt and generation speed per canary model as bars from the job's
result, and says promoted or rolled back; stand-in servers whose ``timings`` the test sets."""

from __future__ import annotations

from typing import Any

import pytest

from tests.measure.test_bench import Builds
from tests.support.web import Running
from tests.web.test_browser import browser, pytestmark, retry, text_of, wait  # noqa: F401
from tests.web.test_canary import ALMOST, B100, B200, activated


def test_the_page_runs_a_canary_and_draws_both_builds_figures(
    b: Builds, running: Running, request: pytest.FixtureRequest
) -> None:
    from selenium.webdriver.common.by import By

    driver: Any = request.getfixturevalue("browser")
    driver.get(running.page_url)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "body[data-loaded]"), "the page")
    tick = '#canary-form input[data-canary-model="chat"]'
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, tick), "the canary choices")

    def start(runs: str) -> None:
        form = driver.find_element(By.CSS_SELECTOR, "form#canary-form")
        chosen = form.find_element(By.NAME, "build").get_attribute("value")
        assert chosen == B200, chosen  # the one installed build not activated
        box = form.find_element(By.CSS_SELECTOR, tick)
        if not box.is_selected():
            box.click()
        repeat = form.find_element(By.NAME, "repeat")
        repeat.clear()
        repeat.send_keys(runs)
        form.find_element(By.CSS_SELECTOR, "button[data-canary-start]").click()

    retry(lambda: start("1"))
    verdict = "[data-canary-verdict]"
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, verdict), "the chart", timeout=60)
    assert text_of(driver, verdict).startswith(f"rolled back: {B100} stays activated")
    bars = driver.execute_script(
        "return [...document.querySelectorAll('#canary-result .bar-row')].map((r) => ["
        "r.dataset.chartModel, r.dataset.chartMetric, r.dataset.chartBuild, r.dataset.value,"
        "r.querySelector('.bar').style.width, r.querySelector('.num').textContent]);"
    )
    assert bars == [
        ["chat", "prompt_per_second", B100, "800", "100%", "800 t/s"],
        ["chat", "prompt_per_second", B200, "560", "70%", "560 t/s"],
        ["chat", "predicted_per_second", B100, "40", "100%", "40 t/s"],
        ["chat", "predicted_per_second", B200, "28", "70%", "28 t/s"],
    ], bars
    drawn = driver.execute_script(
        "const r = document.querySelector('#canary-result .bar.new');"
        "return [r.getBoundingClientRect().width, "
        "r.parentElement.getBoundingClientRect().width];"
    )
    assert 0.65 < drawn[0] / drawn[1] < 0.75, drawn  # drawn, not only set
    assert "generation 30 % slower" in text_of(driver, '[data-chart="chat"]')
    said = '[data-note="canary"]'
    assert text_of(driver, said).startswith("rolled back:")
    assert text_of(driver, f'tr[data-build="{B100}"] td:nth-child(2)') == "yes"
    # the models table shows the figures bench recorded, per build
    wait(
        driver,
        lambda d: (
            f"{B200}: prompt 560 t/s, generation 28 t/s (median of 1)"
            in text_of(d, '[data-bench="chat"]')
        ),
        "the bench figures",
    )

    b.server("b200", timings=ALMOST)
    retry(lambda: start("1"))
    wait(
        driver,
        lambda d: text_of(d, verdict).startswith(f"promoted {B200}"),
        "the promotion",
        timeout=60,
    )
    wait(
        driver,
        lambda d: text_of(d, f'tr[data-build="{B200}"] td:nth-child(2)') == "yes",
        "b200 shown as activated",
    )
    jobs = driver.execute_async_script(
        "const done = arguments[0];"
        "fetch('/api/jobs').then((r) => r.json())"
        ".then((jobs) => done(jobs.map((j) => [j.kind, j.state, j.result.promoted])));"
    )
    assert jobs == [["canary", "done", False], ["canary", "done", True]], jobs
    assert activated(b) == [B200] and b.none_left()
    # a reloaded page draws the last canary again
    driver.refresh()
    wait(driver, lambda d: text_of(d, verdict).startswith(f"promoted {B200}"), "redrawn")
