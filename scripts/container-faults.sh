#!/usr/bin/env bash
# The fault tests on containers (docs/containers.md, "Faults on containers"): a worker held to a
# CPU and memory limit, then kill, pause and a broker kill under load, on the compose stack of
# the project's own images: 110 s with the images cached (2026-11-27, a quiet machine). Run here
# before a release, like the long chaos rounds (`scheduler chaos`), to keep the CI test command
# (scripts/test.sh) within its time budget.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh \
  --java "the images are built from the launcher's Kafka and Cassandra jars" \
  --next "building the images, then the fault tests on containers"
bash scripts/containers.sh >/dev/null
# The stack brings its own Kafka and Cassandra: no server of the launcher is used or needed.
env -u SCHEDULER_KAFKA_BOOTSTRAP -u SCHEDULER_CASSANDRA_HOSTS SCHEDULER_TEST_CONTAINERS=1 \
  .venv/bin/python -m pytest -q -rfEsxX --strict-markers -p no:cacheprovider -m containers \
  tests/services/test_compose_faults.py "$@"
