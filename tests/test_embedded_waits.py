"""`EmbeddedScheduler.wait_until_idle`: a wait that times out says what it was waiting on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler import EmbeddedScheduler, Task


def test_a_wait_that_times_out_names_the_first_task_not_final_and_how_to_list_them(
    tmp_path: Path,
) -> None:
    # A task due tomorrow (say a schedule's next fire left in the data directory) keeps a wait
    # that includes future tasks busy: the error names it, not only the timeout.
    due = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    with EmbeddedScheduler(data_dir=tmp_path, executor=lambda task, context: None) as scheduler:
        task = Task("nightly-report", due, "2027-01-01", {})
        scheduler.client.schedule_task(task).result(timeout=30)
        scheduler.wait_until_idle(timeout=30)  # nothing due now: idle without the future
        with pytest.raises(TimeoutError) as raised:
            scheduler.wait_until_idle(timeout=2, include_future=True)
    message = str(raised.value)
    assert message.startswith("the scheduler was still busy after 2s: ")
    assert f"the first task not final is {task.key} (pending), due in the future at " in message
    assert f"`SCHEDULER_DATA_DIR={tmp_path} scheduler tasks list` lists them" in message
