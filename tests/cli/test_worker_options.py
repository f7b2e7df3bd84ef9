"""`scheduler worker`'s data directory and the address and pages of its metrics port, as a real
process."""

from __future__ import annotations

import signal
import subprocess
import urllib.error
import urllib.request

from tests.cli.conftest import SCRIPT
from tests.cli.helpers import wait_for
from tests.http import free_port, probe


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as refused:
        return refused.code
    except OSError:  # nothing listens there (yet)
        return 0


def test_the_worker_keeps_its_data_in_data_dir_and_serves_only_its_three_pages(
    embedded, monkeypatch, tmp_path
):
    monkeypatch.delenv("SCHEDULER_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    port = free_port()
    given = tmp_path / "elsewhere"
    process = subprocess.Popen(
        [SCRIPT, "worker", "--data-dir", str(given), "--metrics-port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_for(lambda: (probe(port, "/readyz") or (0,))[0] == 200, timeout=60)
        base = f"http://127.0.0.1:{port}"
        assert status_of(f"{base}/metrics") == 200
        assert status_of(f"{base}/healthz") == 200
        for path in ("/", "/metricz", "/healthz/x", "/favicon.ico"):
            assert status_of(base + path) == 404, path
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as page:
            assert b"scheduler_partitions_owned" in page.read()
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert sorted(p.name for p in given.iterdir()) == ["log.db", "store.db"]
    assert not (tmp_path / ".scheduler").exists()
    assert f"metrics at http://0.0.0.0:{port}/metrics" in out  # every interface by default


def test_metrics_host_binds_the_port_to_that_address_only(embedded, monkeypatch):
    port = free_port()
    monkeypatch.setenv("SCHEDULER_METRICS_HOST", "127.0.0.2")
    process = subprocess.Popen(
        [SCRIPT, "worker", "--metrics-port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_for(lambda: status_of(f"http://127.0.0.2:{port}/readyz") == 200, timeout=60)
        assert probe(port, "/readyz") is None  # nothing on 127.0.0.1
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"metrics at http://127.0.0.2:{port}/metrics" in out
