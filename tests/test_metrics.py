"""The lock-free counter behind per-record metrics reads back, and scrapes, what was counted."""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, generate_latest

from scheduler.metrics import TickCounter


def test_ticks_and_bulk_additions_from_many_threads_all_count() -> None:
    registry = CollectorRegistry()
    counter = TickCounter("test_things", "Things counted.", registry=registry)
    threads = [
        threading.Thread(target=lambda: [counter.tick() for _ in range(5_000)]) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    counter.add(7)
    for thread in threads:
        thread.join(30)

    assert counter.value == 20_007
    assert "test_things_total 20007.0" in generate_latest(registry).decode()


def test_docs_metrics_md_lists_every_metric_as_the_registry_describes_it() -> None:
    from pathlib import Path

    from scheduler.metrics import reference

    page = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text("utf-8")
    documented = page.split("<!-- metrics:begin -->\n")[1].split("<!-- metrics:end -->")[0]
    assert documented == reference(), (
        "docs/metrics.md is stale; paste the output of "
        "python -c 'import scheduler.metrics as m; print(m.reference(), end=\"\")' between its "
        "metrics markers"
    )
    assert "`scheduler_persist_failures_total` | counter" in documented
