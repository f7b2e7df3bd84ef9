"""Settings from file, environment and options: precedence, and errors that name the source."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scheduler.config import accepted, load_settings
from scheduler.errors import ConfigurationError
from scheduler.runtime import cassandra_replication


def test_a_bad_environment_value_is_named_with_the_accepted_values(script, monkeypatch):
    monkeypatch.setenv("SCHEDULER_LOG", "kafak")
    result = script("settings", "show")
    assert result.returncode == 2
    assert "SCHEDULER_LOG='kafak' is not one of: embedded, kafka" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("variable", "meant"),
    [
        ("SCHEDULER_PARTITONS", "SCHEDULER_PARTITIONS"),  # misspelt
        ("SCHEDULER_KAFKA_TOPIC", "SCHEDULER_TOPIC"),  # a word too many
        ("SCHEDULER_CONSUMER_GROUP", "SCHEDULER_GROUP_ID"),  # Kafka's word for it
        ("SCHEDULER_KAFKA_GROUP", "SCHEDULER_GROUP_ID"),  # GROUP tells more than KAFKA
        ("SCHEDULER_CASSANDRA_HOST", "SCHEDULER_CASSANDRA_HOSTS"),
    ],
)
def test_a_variable_that_is_no_setting_is_named_with_the_setting_meant(
    script, monkeypatch, variable: str, meant: str
):
    monkeypatch.setenv(variable, "tasks-eu")
    result = script("settings", "show", "--json")
    assert result.returncode == 0
    warning = f"{variable} is not a setting and is ignored; did you mean {meant}?"
    assert warning in result.stderr


def test_only_variables_that_are_no_setting_and_not_the_products_own_are_warned_about(
    monkeypatch,
):
    from scheduler.config import unknown_environment

    for variable in os.environ:
        if variable.upper().startswith("SCHEDULER_"):
            monkeypatch.delenv(variable)
    monkeypatch.setenv("SCHEDULER_TOPIC", "tasks-eu")  # a setting
    monkeypatch.setenv("SCHEDULER_SERVICES_DIR", "/tmp/servers")  # the launcher's
    monkeypatch.setenv("SCHEDULER_TASK_KEY", "a/1/b")  # set by the command executor
    monkeypatch.setenv("SCHEDULER_FLEET_RECORD", "/tmp/record.jsonl")
    monkeypatch.setenv("SCHEDULER_SPEEDUPS", "0")  # the C path's switch
    assert unknown_environment() == []
    monkeypatch.setenv("SCHEDULER_WHATEVER", "1")
    assert unknown_environment() == [
        "SCHEDULER_WHATEVER is not a setting and is ignored; `scheduler settings docs` lists "
        "every setting"
    ]


def test_a_number_out_of_range_names_the_variable_and_the_range(monkeypatch):
    monkeypatch.setenv("SCHEDULER_PARTITIONS", "0")
    with pytest.raises(ConfigurationError, match=r"SCHEDULER_PARTITIONS='0' .* >= 1 and <= 10000"):
        load_settings()


def test_every_bad_value_is_reported_at_once(monkeypatch):
    monkeypatch.setenv("SCHEDULER_POOL_SIZE", "many")
    monkeypatch.setenv("SCHEDULER_CASSANDRA_CONSISTENCY", "most")
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert "SCHEDULER_POOL_SIZE='many'" in str(caught.value)
    assert "SCHEDULER_CASSANDRA_CONSISTENCY='most'" in str(caught.value)
    assert "LOCAL_QUORUM" in str(caught.value)


def test_a_toml_file_that_does_not_parse_is_named(script, tmp_path: Path):
    config = tmp_path / "broken.toml"
    config.write_text("partitions = \n")
    result = script("--config", str(config), "settings", "show")
    assert result.returncode == 2
    assert "broken.toml" in result.stderr and "not valid TOML" in result.stderr
    assert "line 1" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unknown_key_in_the_file_is_named_with_a_suggestion(tmp_path: Path):
    config = tmp_path / "typo.toml"
    config.write_text("partitons = 8\n")
    with pytest.raises(
        ConfigurationError, match=r"typo.toml.*'partitons'.*did you mean 'partitions'"
    ):
        load_settings(config)


def test_a_wrong_type_in_the_file_names_the_file_the_key_and_what_is_accepted(tmp_path: Path):
    config = tmp_path / "types.toml"
    config.write_text('partitions = "many"\nlog = "embedded"\n')
    with pytest.raises(ConfigurationError, match=r"types.toml.*: partitions='many'.*an integer"):
        load_settings(config)


@pytest.mark.parametrize(
    ("variable", "value", "advice"),
    [
        # An optional port: its bounds sit inside `Port | None`, and it is no string.
        ("SCHEDULER_METRICS_PORT", "0", "use an integer >= 1 and <= 65535, or empty for none"),
        ("SCHEDULER_CASSANDRA_PORT", "70000", "use an integer >= 1 and <= 65535"),
    ],
)
def test_a_bad_port_is_refused_with_the_range_of_ports(monkeypatch, variable, value, advice):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as refused:
        load_settings()
    assert str(refused.value).endswith(advice)


def test_what_a_path_setting_accepts_says_whether_it_is_a_directory_or_a_file():
    assert accepted("data_dir") == "a directory path (created if missing)"
    assert accepted("cassandra_tls_ca_file") == "a file path, or empty for none"


def test_a_missing_file_is_named(tmp_path: Path):
    with pytest.raises(ConfigurationError, match=r"nowhere.toml' does not exist"):
        load_settings(tmp_path / "nowhere.toml")


def test_the_environment_beats_the_file_and_options_beat_both(tmp_path: Path, monkeypatch):
    config = tmp_path / "scheduler.toml"
    config.write_text('partitions = 32\ntopic = "from-file"\nlog_level = "WARNING"\n')
    monkeypatch.setenv("SCHEDULER_TOPIC", "from-env")
    monkeypatch.setenv("SCHEDULER_LOG_LEVEL", "ERROR")
    settings = load_settings(config, {"log_level": "DEBUG", "log_format": None})
    assert settings.partitions == 32
    assert settings.topic == "from-env"
    assert settings.log_level == "DEBUG"
    assert settings.log_format == "text"


def test_the_config_file_can_come_from_the_environment(script, tmp_path: Path, monkeypatch):
    config = tmp_path / "scheduler.toml"
    config.write_text("partitions = 7\n")
    monkeypatch.setenv("SCHEDULER_CONFIG", str(config))
    result = script("settings", "show", "--json")
    assert result.returncode == 0, result.stderr
    assert '"partitions": 7' in result.stdout


def test_lists_and_mappings_have_compact_environment_forms(monkeypatch):
    monkeypatch.setenv("SCHEDULER_CASSANDRA_HOSTS", "10.0.0.1, 10.0.0.2")
    monkeypatch.setenv("SCHEDULER_CASSANDRA_REPLICATION_STRATEGY", "NetworkTopologyStrategy")
    monkeypatch.setenv("SCHEDULER_CASSANDRA_DATACENTERS", "dc1:3,dc2:2")
    monkeypatch.setenv("SCHEDULER_SPARK_CONF", '{"spark.executor.memory": "2g"}')
    settings = load_settings()
    assert settings.cassandra_hosts == ["10.0.0.1", "10.0.0.2"]
    assert cassandra_replication(settings) == {
        "class": "NetworkTopologyStrategy",
        "dc1": 3,
        "dc2": 2,
    }
    assert settings.spark_conf == {"spark.executor.memory": "2g"}


def test_client_settings_written_as_numbers_and_booleans_are_taken_as_text(
    tmp_path: Path, monkeypatch
):
    """librdkafka and Spark take every value as text; JSON and TOML users write numbers."""
    config = tmp_path / "scheduler.toml"
    config.write_text(
        '[kafka_producer_config]\n"linger.ms" = 5\n"enable.idempotence" = true\n'
        '[spark_conf]\n"spark.sql.shuffle.partitions" = 8\n'
    )
    monkeypatch.setenv("SCHEDULER_KAFKA_CONSUMER_CONFIG", '{"heartbeat.interval.ms": 300}')
    settings = load_settings(config)
    assert settings.kafka_consumer_config == {"heartbeat.interval.ms": "300"}
    assert settings.kafka_producer_config == {"linger.ms": "5", "enable.idempotence": "true"}
    assert settings.spark_conf == {"spark.sql.shuffle.partitions": "8"}


def test_a_client_setting_that_is_a_table_is_still_refused(monkeypatch):
    monkeypatch.setenv("SCHEDULER_KAFKA_CONFIG", '{"linger.ms": {"value": 5}}')
    with pytest.raises(ConfigurationError, match="SCHEDULER_KAFKA_CONFIG"):
        load_settings()


def test_settings_that_contradict_each_other_are_refused(monkeypatch):
    monkeypatch.setenv("SCHEDULER_CASSANDRA_REPLICATION_STRATEGY", "NetworkTopologyStrategy")
    with pytest.raises(ConfigurationError, match="needs SCHEDULER_CASSANDRA_DATACENTERS"):
        load_settings()


def test_an_executor_that_is_neither_built_in_nor_a_path_is_refused(monkeypatch):
    monkeypatch.setenv("SCHEDULER_EXECUTOR", "sparkk")
    with pytest.raises(ConfigurationError, match=r"SCHEDULER_EXECUTOR='sparkk'.*noop, spark"):
        load_settings()


@pytest.mark.parametrize("topic", ["bad topic!", "tâches", "..", "t" * 250])
def test_a_topic_name_kafka_would_refuse_is_refused_with_kafkas_rule(topic, monkeypatch):
    """Refused before any broker is asked: it was Kafka's TOPIC_EXCEPTION, reported as Kafka
    being unavailable (exit 3), from the first command that created the topic."""
    monkeypatch.setenv("SCHEDULER_TOPIC", topic)
    with pytest.raises(ConfigurationError, match=r"SCHEDULER_TOPIC=.*249 ASCII letters"):
        load_settings()


def test_a_topic_name_at_kafkas_limits_is_taken(monkeypatch):
    monkeypatch.setenv("SCHEDULER_TOPIC", "Tasks.eu-west_1" + "x" * 234)
    assert len(load_settings().topic) == 249


@pytest.mark.parametrize("level", ["ANY", "any"])
def test_consistency_any_is_refused_saying_it_would_fail_reads_and_risk_writes(level, monkeypatch):
    """Cassandra refuses every read at ANY: a worker or `tasks list` failed only at its first
    read, with the driver's traceback. Writes at ANY need no replica, so tasks could be lost."""
    monkeypatch.setenv("SCHEDULER_CASSANDRA_CONSISTENCY", level)
    with pytest.raises(ConfigurationError) as refused:
        load_settings()
    message = str(refused.value)
    assert f"SCHEDULER_CASSANDRA_CONSISTENCY='{level}'" in message
    assert "reads cannot use ANY" in message
    assert "before any replica has it" in message
    assert "use one of: ONE," in message and "ANY," not in message


def test_engine_settings_carry_the_configured_values(monkeypatch):
    monkeypatch.setenv("SCHEDULER_RETRY_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("SCHEDULER_MAX_IN_FLIGHT", "50")
    monkeypatch.setenv("SCHEDULER_TASK_TIMEOUT_S", "")
    engine = load_settings().engine_settings()
    assert engine.retry.max_attempts == 3
    assert engine.max_in_flight_per_partition == 50
    assert engine.task_timeout_s is None


def test_settings_show_names_the_source_and_masks_secrets(run, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SCHEDULER_KAFKA_CONFIG", "sasl.password=hunter2,linger.ms=10")
    config = tmp_path / "scheduler.toml"
    config.write_text("partitions = 8\n")
    result = run("--config", str(config), "--log-level", "warning", "settings", "show")
    assert result.exit_code == 0
    lines = {line.split()[0]: line.split() for line in result.output.splitlines()}
    assert lines["partitions"][1:3] == ["8", "file"]
    assert lines["log_level"][1:3] == ["WARNING", "cli"]
    assert lines["kafka_config"][2] == "env"
    assert "hunter2" not in result.output
    assert "sasl.password=***" in result.output


def test_settings_show_masks_the_cassandra_password(run, monkeypatch):
    monkeypatch.setenv("SCHEDULER_CASSANDRA_USERNAME", "scheduler")
    monkeypatch.setenv("SCHEDULER_CASSANDRA_PASSWORD", "hunter2")
    result = run("settings", "show")
    assert result.exit_code == 0
    lines = {line.split()[0]: line.split() for line in result.output.splitlines()}
    assert lines["cassandra_password"][1:3] == ["***", "env"]
    assert lines["cassandra_username"][1] == "scheduler"
    assert "hunter2" not in result.output


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ("SCHEDULER_CASSANDRA_USERNAME", "SCHEDULER_CASSANDRA_PASSWORD"),
        ("SCHEDULER_CASSANDRA_PASSWORD", "SCHEDULER_CASSANDRA_USERNAME"),
        ("SCHEDULER_CASSANDRA_TLS_CERT_FILE", "SCHEDULER_CASSANDRA_TLS_KEY_FILE"),
        ("SCHEDULER_CASSANDRA_TLS_KEY_FILE", "SCHEDULER_CASSANDRA_TLS_CERT_FILE"),
        ("SCHEDULER_CASSANDRA_TLS_KEY_PASSWORD", "SCHEDULER_CASSANDRA_TLS_KEY_FILE"),
    ],
)
def test_half_of_a_cassandra_login_or_client_certificate_is_refused(given, missing, monkeypatch):
    monkeypatch.setenv(given, "x")
    with pytest.raises(ConfigurationError, match=f"{given} is set but {missing} is not"):
        load_settings()


def test_a_password_is_taken_as_written(monkeypatch):
    # Other optional settings read "none" as unset; a password may be the word itself.
    monkeypatch.setenv("SCHEDULER_CASSANDRA_USERNAME", "app")
    monkeypatch.setenv("SCHEDULER_CASSANDRA_PASSWORD", "none")
    assert load_settings().cassandra_password == "none"


def test_the_client_key_password_reaches_the_tls_options_and_is_masked(
    tmp_path: Path, run, monkeypatch
):
    from scheduler.runtime import cassandra_security

    monkeypatch.setenv("SCHEDULER_CASSANDRA_TLS_CERT_FILE", str(tmp_path / "client.pem"))
    monkeypatch.setenv("SCHEDULER_CASSANDRA_TLS_KEY_FILE", str(tmp_path / "client.key"))
    monkeypatch.setenv("SCHEDULER_CASSANDRA_TLS_KEY_PASSWORD", "hunter4")
    tls = cassandra_security(load_settings())["tls"]
    assert tls.key_password == "hunter4" and "hunter4" not in repr(tls)
    result = run("settings", "show")
    assert result.exit_code == 0
    assert "hunter4" not in result.output


def test_a_tls_file_turns_tls_on(tmp_path: Path, monkeypatch):
    from scheduler.runtime import cassandra_security

    assert cassandra_security(load_settings()) == {}
    ca = tmp_path / "ca.pem"
    monkeypatch.setenv("SCHEDULER_CASSANDRA_TLS_CA_FILE", str(ca))
    tls = cassandra_security(load_settings())["tls"]
    assert tls.ca_file == ca and tls.check_hostname is True
    monkeypatch.delenv("SCHEDULER_CASSANDRA_TLS_CA_FILE")
    monkeypatch.setenv("SCHEDULER_CASSANDRA_TLS", "true")
    assert cassandra_security(load_settings())["tls"].ca_file is None


def test_secrets_in_the_per_client_kafka_settings_are_masked_too(run, monkeypatch):
    monkeypatch.setenv("SCHEDULER_KAFKA_PRODUCER_CONFIG", "sasl.password=hunter2,linger.ms=10")
    monkeypatch.setenv("SCHEDULER_KAFKA_CONSUMER_CONFIG", "ssl.key.password=hunter3")
    result = run("settings", "show")
    assert result.exit_code == 0
    assert "hunter2" not in result.output and "hunter3" not in result.output
    assert "linger.ms=10" in result.output


def test_key_material_and_cloud_secrets_in_mapping_settings_are_masked(run, monkeypatch):
    monkeypatch.setenv(
        "SCHEDULER_KAFKA_CONFIG",
        "security.protocol=SSL,ssl.key.pem=PRIVATE-PEM,ssl.key.location=/etc/k.pem,"
        "sasl.oauthbearer.config=clientSecret=OAUTH-TEXT",
    )
    monkeypatch.setenv(
        "SCHEDULER_SPARK_CONF",
        "spark.hadoop.fs.s3a.secret.key=S3-SECRET,"
        "spark.hadoop.fs.azure.account.key.acct.blob.core.windows.net=AZURE-KEY,"
        "spark.io.encryption.keySizeBits=256",
    )
    result = run("settings", "show", "--json")
    assert result.exit_code == 0, result.output
    for secret in ("PRIVATE-PEM", "OAUTH-TEXT", "S3-SECRET", "AZURE-KEY"):
        assert secret not in result.output
    shown = json.loads(result.output)
    # Where a key is and what kind it is are not secrets, and an operator needs to see them.
    assert shown["kafka_config"]["ssl.key.location"] == "/etc/k.pem"
    assert shown["spark_conf"]["spark.io.encryption.keySizeBits"] == "256"
