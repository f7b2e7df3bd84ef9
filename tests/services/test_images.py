"""scripts/containers.sh caches the images by content (run by `scripts/test.sh --containers`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "containers.sh"


def build() -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1800)


@pytest.mark.containers
def test_a_second_build_builds_nothing_and_names_the_same_images():
    first, second = build(), build()
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    images = dict(line.split("=", 1) for line in second.stdout.split())
    assert set(images) == {"base", "scheduler-worker", "scheduler-kafka", "scheduler-cassandra"}
    assert second.stdout == first.stdout
    assert "building" not in second.stderr, second.stderr
    for name, image in images.items():
        local = image.split(":")[0] + ":local"
        ids = [
            subprocess.run(
                ["docker", "image", "inspect", "-f", "{{.Id}}", ref],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for ref in (image, local)
        ]
        assert ids[0] == ids[1], f"{local} is not {image} ({name})"
