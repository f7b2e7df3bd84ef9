"""An embedded data directory made with one partition count, used with another: the error
speaks of the embedded log and its data directory, never of Kafka's topics or docs."""

from __future__ import annotations


def test_another_partition_count_on_an_embedded_log_says_to_keep_it_or_use_a_new_data_dir(
    script, embedded, monkeypatch
):
    assert script("enqueue", "o").returncode == 0  # the log now has 4 partitions
    for fewer_or_more in ("2", "8"):
        monkeypatch.setenv("SCHEDULER_PARTITIONS", fewer_or_more)
        refused = script("enqueue", "o")
        assert refused.returncode == 2
        assert f"the embedded log {embedded / 'log.db'}" in refused.stderr
        assert f"has 4 partitions but SCHEDULER_PARTITIONS={fewer_or_more}" in refused.stderr
        assert "set SCHEDULER_PARTITIONS=4, or start over in a new data directory" in refused.stderr
        assert "kafka" not in refused.stderr.lower() and "topic move" not in refused.stderr
