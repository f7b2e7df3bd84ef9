"""scheduler.services.container: what the Kafka and Cassandra images run, without Docker."""

from __future__ import annotations

import pytest

from scheduler.services import container
from scheduler.services.cassandra import Cassandra
from scheduler.services.maven import _wanted


class Execed(Exception):
    """Raised by the stand-in for os.execv: the argv the process would have become."""


@pytest.fixture
def cassandra_cache(tmp_path, monkeypatch):
    """A state dir whose jar cache holds a resolved (stand-in) Cassandra, as the image does."""
    monkeypatch.setenv("SCHEDULER_SERVICES_DIR", str(tmp_path))
    home = tmp_path / "cache" / "cassandra"
    (home / "lib").mkdir(parents=True)
    for jar in ("cassandra-all-5.0.9.jar", "jamm-0.4.0.jar"):
        (home / "lib" / jar).write_bytes(b"")
    (home / "resolved.txt").write_text(_wanted(Cassandra().artifacts()))
    return tmp_path


def test_the_entry_point_configures_the_server_on_the_given_ports_then_becomes_its_jvm(
    cassandra_cache, monkeypatch
):
    monkeypatch.setenv("SCHEDULER_SERVICES_CASSANDRA_PORT", "19042")
    monkeypatch.setenv("SCHEDULER_SERVICES_CASSANDRA_STORAGE_PORT", "17000")
    monkeypatch.setattr(container, "require_java17", lambda: "/usr/bin/java")

    def execv(path, argv):
        raise Execed(path, argv)

    monkeypatch.setattr(container.os, "execv", execv)
    with pytest.raises(Execed) as execed:
        container.main(["cassandra"])
    path, argv = execed.value.args
    assert path == argv[0] == "/usr/bin/java"
    assert argv[-1] == Cassandra.main_class
    assert str(cassandra_cache / "cache" / "cassandra" / "lib" / "jamm-0.4.0.jar") in argv[-2]
    config = (cassandra_cache / "cassandra" / "conf" / "cassandra.yaml").read_text()
    assert "native_transport_port: 19042" in config
    assert "storage_port: 17000" in config
    assert "listen_address: 127.0.0.1" in config


def test_resolve_prints_the_cache_directory_the_image_copies(cassandra_cache, capsys):
    assert container.main(["--resolve", "cassandra"]) == 0
    assert capsys.readouterr().out.strip() == str(cassandra_cache / "cache" / "cassandra")


def test_anything_else_is_told_the_usage(capsys):
    assert container.main([]) == 2
    assert "usage: python -m scheduler.services.container" in capsys.readouterr().err
