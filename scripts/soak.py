"""A chaos soak: three workers under a steady load, a fault every PERIOD seconds, then the check.

The faults take turns: SIGKILL a worker (a new one replaces it), restart the Kafka broker,
SIGTERM a worker (replaced too), restart the Cassandra node. The servers must be the ones
`scheduler services up` started (they are restarted through its launcher). At the end every
accepted task must have run, in order per ordering id; duplicates are counted (only tasks in
flight at a kill, or still unwritten when a partition moved, may run twice).

    SCHEDULER_KAFKA_BOOTSTRAP=127.0.0.1:9092 SCHEDULER_CASSANDRA_HOSTS=127.0.0.1 \\
        PYTHONPATH=. .venv/bin/python scripts/soak.py --duration 900 --period 60

`--faults` picks the faults that take turns, and `--outage S` keeps a restarted server down for
S seconds (a maintenance window rather than a restart).

Prints one line a fault (time, fault, tasks sent, the workers' RSS in MB) and the verdict;
exits 1 if a task is missing or ran out of order.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from scheduler.fleet import LoadGenerator, WorkerProcess
from scheduler.services import launcher
from tests.distributed.conftest import START_TIMEOUT_S, Fleet, some_sleep

FAULTS = ("kill9", "kafka", "sigterm", "cassandra")


def rss_mb(worker: WorkerProcess) -> int | None:
    try:
        status = Path(f"/proc/{worker.pid}/status").read_text()
    except OSError:
        return None
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=900, help="seconds of load")
    parser.add_argument("--period", type=float, default=60, help="seconds between faults")
    parser.add_argument("--rate", type=float, default=100, help="tasks a second")
    parser.add_argument(
        "--outage", type=float, default=0, help="seconds a restarted server stays down"
    )
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"the faults to take turns with, comma-separated (of {','.join(FAULTS)})",
    )
    args = parser.parse_args()
    unknown = set(args.faults.split(",")) - set(FAULTS)
    if unknown:
        parser.error(f"unknown fault(s) {sorted(unknown)}; choose from {','.join(FAULTS)}")

    fleet = Fleet(Path(tempfile.mkdtemp(prefix="soak-")))
    print(f"record and worker logs in {fleet.directory}", flush=True)
    names = (f"w{n}" for n in itertools.count(1))
    workers = [fleet.worker(next(names)) for _ in range(3)]
    try:
        for worker in workers:
            worker.wait_until_owning(START_TIMEOUT_S)
        load = LoadGenerator(
            fleet.client(),
            ordering_ids=40,
            rate_per_s=args.rate,
            duration_s=args.duration,
            lead_ms=1500,
            data=some_sleep(every=7, sleep_ms=150),
        ).start()
        faults = itertools.cycle(args.faults.split(","))
        start = time.monotonic()
        next_fault = start + args.period
        while load.running:
            time.sleep(1)
            now = time.monotonic()
            # No fault in the last 30 s (and outage): the run ends with every server up.
            if now < next_fault or now - start > args.duration - 30 - args.outage:
                continue
            next_fault += args.period
            fault = next(faults)
            if fault in ("kill9", "sigterm"):
                victim = workers.pop(0)
                if fault == "kill9":
                    victim.kill()
                else:
                    victim.stop(60)
                workers.append(fleet.worker(next(names)))
            else:
                status = launcher.restart(fault, down_s=args.outage)
                assert status.healthy, status.detail
            rss = [rss_mb(worker) for worker in workers]
            print(f"{now - start:6.0f} s  {fault:9s} sent {load.sent:7d}  rss MB {rss}", flush=True)
        accepted = load.join(timeout=300)
        report = fleet.wait_until_executed(accepted, timeout=300, stall_s=120)
        print(f"unacknowledged sends: {len(load.failed)}")
        print(report.summary())
        print(f"rss MB at the end: {[rss_mb(worker) for worker in workers]}")
        return 0 if report.ok else 1
    finally:
        fleet.close()


if __name__ == "__main__":
    raise SystemExit(main())
