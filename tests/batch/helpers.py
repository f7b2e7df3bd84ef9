"""Building configurations in the seed's shape and driving the pure core with a stepped clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.batch import (
    Configuration,
    JobState,
    Outcome,
    finish,
    new_state,
    parse_configuration,
    parse_partition,
    runnable,
    start,
)

P = parse_partition
"""A partition instant (epoch ms) from the seed's 'yyyy-MM-dd HH:mm:ss'."""


def seed_job(name: str, **fields: Any) -> dict[str, Any]:
    """A job as the seed writes one (an hourly /bin/true over one day), `fields` overriding."""
    job: dict[str, Any] = {
        "name": name,
        "start_partition": "2000-01-01 00:00:00",
        "end_partition": "2000-01-02 00:00:00",
        "increment": "1 hours",
        "command": ["/bin/true"],
        "dependencies": [],
        "max_parallelism": 100,
        "on_failure": "retry",
        "retry_delay": "15 minutes",
        "retention": "6 months",
        "stdout_path": "/dev/null",
        "stderr_path": "/dev/null",
    }
    job.update(fields)
    return job


def seed_config(*jobs: dict[str, Any], max_parallelism: int = 100) -> dict[str, Any]:
    return {
        "max_parallelism": max_parallelism,
        "scheduler_polling_time": "1000 millis",
        "new_configuration_polling_time": "2 minutes",
        "jobs": list(jobs),
    }


def config(*jobs: dict[str, Any], max_parallelism: int = 100) -> Configuration:
    return parse_configuration(seed_config(*jobs, max_parallelism=max_parallelism))


def fresh(configuration: Configuration) -> dict[str, JobState]:
    return {job.name: new_state(job) for job in configuration.jobs}


Run = tuple[str, str, Outcome]
"""(job, partition as the seed writes it, what its end made of it)."""


def drive(
    configuration: Configuration,
    states: dict[str, JobState],
    now: int,
    succeeds: Callable[[str, int], bool] = lambda job, partition: True,
    rounds: int = 10_000,
) -> list[Run]:
    """Starts whatever is runnable at `now`, ends each run at once (succeeding unless
    `succeeds` says otherwise), and again until nothing starts: the engine at one instant."""
    from scheduler.batch import format_partition

    history: list[Run] = []
    for _ in range(rounds):
        launches = runnable(configuration, states, now)
        if not launches:
            return history
        for launch in launches:
            job = configuration.job(launch.job)
            states[launch.job] = start(states[launch.job], job, launch.partition, now)
        for launch in launches:
            ok = succeeds(launch.job, launch.partition)
            states[launch.job], outcome = finish(states[launch.job], launch.partition, ok, now)
            history.append((launch.job, format_partition(launch.partition), outcome))
    raise AssertionError(f"still starting partitions after {rounds} rounds")


def start_all(
    configuration: Configuration, states: dict[str, JobState], now: int
) -> Mapping[str, int]:
    """Starts what is runnable at `now` without ending it; how many runs started per job."""
    started: dict[str, int] = {}
    for launch in runnable(configuration, states, now):
        job = configuration.job(launch.job)
        states[launch.job] = start(states[launch.job], job, launch.partition, now)
        started[launch.job] = started.get(launch.job, 0) + 1
    return started
