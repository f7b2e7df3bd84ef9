"""The settings a Spark session gets by default, sized to a local master's cores."""

from __future__ import annotations

import os
from typing import Any

import pytest

from scheduler.executors.spark import default_conf, local_cores, session_conf, spark_task_error


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[3]", 3), ("local[4,2]", 4), (" local[2] ", 2)],
)
def test_a_local_master_names_its_cores(master: str, cores: int) -> None:
    assert local_cores(master) == cores


def test_local_star_means_the_cores_this_process_may_use() -> None:
    assert local_cores("local[*]") == len(os.sched_getaffinity(0))
    assert local_cores("local[*,3]") == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("master", ["yarn", "spark://host:7077", "local-cluster[2,1,1024]", "k8s"])
def test_a_cluster_master_has_no_local_cores(master: str) -> None:
    assert local_cores(master) is None


def test_a_local_session_shuffles_into_one_partition_per_core() -> None:
    conf = default_conf("local[3]")

    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert conf["spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"] == "true"
    assert conf["spark.scheduler.mode"] == "FAIR"


def test_a_cluster_session_keeps_sparks_own_shuffle_settings() -> None:
    conf = default_conf("yarn")

    assert "spark.sql.shuffle.partitions" not in conf
    assert "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning" not in conf
    assert conf["spark.scheduler.mode"] == "FAIR"


def test_the_users_spark_conf_wins_over_every_default() -> None:
    conf = session_conf(
        "local[2]",
        {"spark.sql.shuffle.partitions": "200", "spark.scheduler.mode": "FIFO"},
    )

    assert conf["spark.sql.shuffle.partitions"] == "200"
    assert conf["spark.scheduler.mode"] == "FIFO"
    assert conf["spark.sql.session.timeZone"] == "UTC"


def test_an_error_raised_outside_spark_is_left_as_it_is() -> None:
    error = ValueError("Traceback (most recent call last):\n  File x\nKeyError: 'a'")

    assert spark_task_error(error) is None


def test_the_python_exception_is_found_after_the_frames_of_a_chained_traceback() -> None:
    py4j_like: Any = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
    text = (
        "An error occurred while calling o12.collect.\n: org.apache.spark.SparkException: Job "
        "aborted: org.apache.spark.api.python.PythonException: "
        'Traceback (most recent call last):\n  File "a.py", line 1, in f\n    g()\n'
        "KeyError: 'first'\n\nDuring handling of the above exception, another exception "
        'occurred:\n\nTraceback (most recent call last):\n  File "a.py", line 3, in f\n'
        "    raise ValueError(...)\nValueError: bad row\nspanning two lines\n\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(Runner.scala:1)\n"
    )

    assert spark_task_error(py4j_like(text)) == "ValueError: bad row\nspanning two lines"


@pytest.mark.spark
def test_the_shared_session_starts_with_the_defaults_and_the_conf_given(
    spark_session: Any,
) -> None:
    conf = spark_session.sparkContext.getConf()

    assert spark_session.conf.get("spark.sql.shuffle.partitions") == "2"  # local[2]
    assert conf.get("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning") == "true"
    assert conf.get("spark.ui.enabled") == "false"  # the tests' own conf, over Spark's default
