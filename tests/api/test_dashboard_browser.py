"""The dashboard in a real headless Chromium (Debian's chromium and chromedriver, installed by
scripts/browser.sh), driven by Selenium: log in with a token, watch a task appear and complete,
be refused what the token's role may not do. Screenshots land in docs/dashboard/."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from scheduler.api.auth import Role
from tests.api.browser import browser, click, confirm, log_in, shoot, text, wait_text
from tests.api.server import ApiServer

__all__ = ["browser"]  # the fixture

Call = Callable[..., httpx.Response]


def _schedule(as_role: Call, ordering_id: str, key: str, seconds: float, **data: Any) -> None:
    due = (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()
    body = {"ordering_id": ordering_id, "scheduled_time": due, "uniqueness_key": key, "data": data}
    answer = as_role(Role.OPERATE, "POST", "/api/v1/tasks", json=body)
    assert answer.status_code == 201, answer.text


def test_a_wrong_token_does_not_log_in(browser: WebDriver, server: ApiServer) -> None:
    log_in(browser, server, "sch_not-a-token", refused=True)
    assert "not a token of this API" in text(browser, "login-error")
    assert browser.current_url.endswith("/dashboard/login")


def test_the_fleet_page_shows_the_worker_and_its_partitions(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str]
) -> None:
    log_in(browser, server, tokens[Role.READ])
    assert "api-test-worker" in text(browser, "workers")
    rows = browser.find_elements(By.CSS_SELECTOR, "#partitions tr")
    assert len(rows) == 1 + 4
    assert browser.find_elements(By.CSS_SELECTOR, "svg.spark polyline")
    shoot(browser, "fleet.png")


def test_a_scheduled_task_appears_and_completes(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    log_in(browser, server, tokens[Role.OPERATE])
    browser.get(f"{server.url}/dashboard/tasks?ordering_id=browser-orders")
    text(browser, "no-tasks")
    _schedule(as_role, "browser-orders", "nightly-report", 4, report="sales")
    wait_text(browser, "#task-table tr[data-key='nightly-report'] .state", "pending")
    shoot(browser, "tasks-pending.png")
    wait_text(browser, "#task-table tr[data-key='nightly-report'] .state", "succeeded")
    shown = browser.find_element(By.CSS_SELECTOR, "#task-table tr[data-key='nightly-report'] time")
    assert "UTC" in str(shown.get_attribute("title"))
    assert "GMT+9" in shown.text  # the viewer's zone, not UTC
    shoot(browser, "tasks.png")


def test_a_read_token_is_refused_dropping_a_failed_task(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    _schedule(as_role, "browser-failing", "flaky-load", 0, fail="source table missing")
    log_in(browser, server, tokens[Role.READ])
    browser.get(f"{server.url}/dashboard/tasks?ordering_id=browser-failing")
    wait_text(browser, "#task-table tr[data-key='flaky-load'] .state", "failed")
    drop = "tr[data-key='flaky-load'] button[name=drop]"
    locked = wait_text(browser, drop, "drop")
    assert "needs the admin role" in str(locked.get_attribute("title"))
    click(browser, drop)
    assert "Drop flaky-load" in confirm(browser)
    message = text(browser, "message")
    assert "refused: drop needs the admin role" in message
    shoot(browser, "refused.png")
    listed = as_role(Role.READ, "GET", "/api/v1/tasks", params={"ordering_id": "browser-failing"})
    assert [t["state"] for t in listed.json()["tasks"]] == ["failed"]


def test_an_operator_retries_a_failed_task_after_confirming(
    browser: WebDriver, server: ApiServer, tokens: dict[Role, str], as_role: Call
) -> None:
    _schedule(as_role, "browser-retry", "export", 0, fail="disk full")
    log_in(browser, server, tokens[Role.OPERATE])
    browser.get(f"{server.url}/dashboard/tasks?ordering_id=browser-retry")
    wait_text(browser, "#task-table tr[data-key='export'] .state", "failed")
    click(browser, "tr[data-key='export'] button[name=retry]")
    confirm(browser)
    assert "retry requested for export" in text(browser, "message")
