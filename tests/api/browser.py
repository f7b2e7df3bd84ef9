"""A real headless Chromium for the dashboard's tests: Debian's chromium and chromedriver
(installed by scripts/browser.sh), driven by Selenium, with a fresh profile."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.api.server import ApiServer

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "dashboard"
VIEWER_TZ = "Asia/Tokyo"
"""The browser's time zone, so that a time shown in it differs from UTC."""


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


def log_in(browser: WebDriver, server: ApiServer, token: str, *, refused: bool = False) -> None:
    """Log in with `token` from a fresh session; return once the fleet page (or, if `refused`,
    the login page's error) has loaded, so that the next page is asked with the cookie."""
    browser.delete_all_cookies()
    browser.get(f"{server.url}/dashboard")
    field = WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "token"))
    field.send_keys(token)
    browser.find_element(By.ID, "login").click()
    landed = "login-error" if refused else "fleet"
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.ID, landed))


def text(browser: WebDriver, element_id: str, timeout: float = 30.0) -> str:
    element = WebDriverWait(browser, timeout).until(lambda b: b.find_element(By.ID, element_id))
    return str(element.text)


def wait_text(browser: WebDriver, css: str, wanted: str, timeout: float = 30.0) -> Any:
    """The first element `css` selects whose text holds `wanted`, once there is one. An element
    htmx swaps out while it is read is stale: read again at the next poll."""

    def seen(driver: WebDriver) -> Any:
        found = [e for e in driver.find_elements(By.CSS_SELECTOR, css) if wanted in e.text]
        return found[0] if found else False

    stale = (StaleElementReferenceException,)
    wait = WebDriverWait(browser, timeout, poll_frequency=0.2, ignored_exceptions=stale)
    return wait.until(seen)


def shoot(browser: WebDriver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / name))


def confirm(browser: WebDriver) -> str:
    def alert(driver: WebDriver) -> Any:
        try:
            return driver.switch_to.alert
        except NoAlertPresentException:
            return False

    dialog = WebDriverWait(browser, 10).until(alert)
    text = str(dialog.text)
    dialog.accept()
    return text


def click(browser: WebDriver, css: str, timeout: float = 10.0) -> None:
    """Click what `css` selects, again if htmx swapped it out under the click."""
    stale = (StaleElementReferenceException,)
    wait = WebDriverWait(browser, timeout, poll_frequency=0.1, ignored_exceptions=stale)
    wait.until(lambda driver: driver.find_element(By.CSS_SELECTOR, css).click() or True)
