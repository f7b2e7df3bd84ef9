"""The dashboard in a real headless Chromium (Debian's chromium and chromedriver, installed by
scripts/browser.sh), driven by Selenium: log in with a token, watch a task appear and complete,
be refused what the token's role may not do. Screenshots land in docs/dashboard/."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from scheduler.api.auth import Role
from tests.api.server import ApiServer

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "dashboard"
VIEWER_TZ = "Asia/Tokyo"
"""The browser's time zone, so that a time shown in it differs from UTC."""

Call = Callable[..., httpx.Response]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    for program in (CHROMIUM, CHROMEDRIVER):
        if not os.access(program, os.X_OK):
            pytest.fail(f"{program} is missing: run `bash scripts/browser.sh` (test.sh does)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    service = Service(CHROMEDRIVER, env={**os.environ, "TZ": VIEWER_TZ})
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _log_in(browser: WebDriver, server: ApiServer, token: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{server.url}/dashboard")
    field = WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "token"))
    field.send_keys(token)
    browser.find_element(By.ID, "login").click()


def _text(browser: WebDriver, element_id: str, timeout: float = 30.0) -> str:
    element = WebDriverWait(browser, timeout).until(lambda b: b.find_element(By.ID, element_id))
    return str(element.text)


def _wait_text(browser: WebDriver, css: str, wanted: str, timeout: float = 30.0) -> Any:
    def seen(driver: WebDriver) -> Any:
        found = [e for e in driver.find_elements(By.CSS_SELECTOR, css) if wanted in e.text]
        return found[0] if found else False

    return WebDriverWait(browser, timeout, poll_frequency=0.2).until(seen)


def _shoot(browser: WebDriver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / name))


def _schedule(as_role: Call, ordering_id: str, key: str, seconds: float, **data: Any) -> None:
    due = (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()
    body = {"ordering_id": ordering_id, "scheduled_time": due, "uniqueness_key": key, "data": data}
    answer = as_role(Role.OPERATE, "POST", "/api/v1/tasks", json=body)
    assert answer.status_code == 201, answer.text


def _confirm(browser: WebDriver) -> str:
    def alert(driver: WebDriver) -> Any:
        try:
            return driver.switch_to.alert
        except NoAlertPresentException:
            return False

    dialog = WebDriverWait(browser, 10).until(alert)
    text = str(dialog.text)
    dialog.accept()
    return text


def test_a_wrong_token_does_not_log_in(browser: WebDriver, server: ApiServer) -> None:
    _log_in(browser, server, "sch_not-a-token")
    assert "not a token of this API" in _text(browser, "login-error")
    assert browser.current_url.endswith("/dashboard/login")


def test_the_fleet_page_shows_the_worker_and_its_partitions(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str]
) -> None:
    _log_in(browser, server, tokens[Role.READ])
    assert "api-test-worker" in _text(browser, "workers")
    rows = browser.find_elements(By.CSS_SELECTOR, "#partitions tr")
    assert len(rows) == 1 + 4
    assert browser.find_elements(By.CSS_SELECTOR, "svg.spark polyline")
    _shoot(browser, "fleet.png")


def test_a_scheduled_task_appears_and_completes(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    _log_in(browser, server, tokens[Role.OPERATE])
    browser.get(f"{server.url}/dashboard/tasks?ordering_id=browser-orders")
    _text(browser, "no-tasks")
    _schedule(as_role, "browser-orders", "nightly-report", 4, report="sales")
    _wait_text(browser, "#task-table tr[data-key='nightly-report'] .state", "pending")
    _shoot(browser, "tasks-pending.png")
    _wait_text(browser, "#task-table tr[data-key='nightly-report'] .state", "succeeded")
    shown = browser.find_element(By.CSS_SELECTOR, "#task-table tr[data-key='nightly-report'] time")
    assert "UTC" in str(shown.get_attribute("title"))
    assert "GMT+9" in shown.text  # the viewer's zone, not UTC
    _shoot(browser, "tasks.png")


def test_a_read_token_is_refused_dropping_a_failed_task(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    _schedule(as_role, "browser-failing", "flaky-load", 0, fail="source table missing")
    _log_in(browser, server, tokens[Role.READ])
    browser.get(f"{server.url}/dashboard/tasks?ordering_id=browser-failing")
    _wait_text(browser, "#task-table tr[data-key='flaky-load'] .state", "failed")
    drop = browser.find_element(By.CSS_SELECTOR, "tr[data-key='flaky-load'] button[name=drop]")
    assert "needs the admin role" in str(drop.get_attribute("title"))
    drop.click()
    assert "Drop flaky-load" in _confirm(browser)
    message = _text(browser, "message")
    assert "refused: drop needs the admin role" in message
    _shoot(browser, "refused.png")
    listed = as_role(Role.READ, "GET", "/api/v1/tasks", params={"ordering_id": "browser-failing"})
    assert [t["state"] for t in listed.json()["tasks"]] == ["failed"]


def test_an_operator_retries_a_failed_task_after_confirming(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    _schedule(as_role, "browser-retry", "export", 0, fail="disk full")
    _log_in(browser, server, tokens[Role.OPERATE])
    browser.get(f"{server.url}/dashboard/tasks?ordering_id=browser-retry")
    _wait_text(browser, "#task-table tr[data-key='export'] .state", "failed")
    browser.find_element(By.CSS_SELECTOR, "tr[data-key='export'] button[name=retry]").click()
    _confirm(browser)
    assert "retry requested for export" in _text(browser, "message")
