#!/usr/bin/env bash
# The fault tests on containers (docs/containers.md, "Faults on containers"): a worker held to a
# CPU and memory limit, then kill, pause and a broker kill under load, on the compose stack of
# the project's own images. Some 13 minutes, so they run here, before a release, like the long
# chaos rounds (`scheduler chaos`), and not in the CI test command (scripts/test.sh).
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
