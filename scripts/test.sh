#!/usr/bin/env bash
# Install, start Kafka and Cassandra on 127.0.0.1 (fetched from Maven Central unless
# SCHEDULER_KAFKA_BOOTSTRAP / SCHEDULER_CASSANDRA_HOSTS point at running servers), install the
# headless browser of the dashboard's tests (scripts/browser.sh) and the peer schedulers' servers
# of the bench smoke tests (scripts/bench-peers.sh), then run the whole test suite. Extra
# arguments go to pytest.
# Needs Java 17 (the Spark tests, and the local servers): said before anything is installed when
# it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh \
  --java "the test suite runs Spark jobs and starts Kafka and Cassandra servers (JVMs)" \
  --next "checking the servers, then ruff and pytest"

started_here=0
if [ -z "${SCHEDULER_KAFKA_BOOTSTRAP:-}" ] || [ -z "${SCHEDULER_CASSANDRA_HOSTS:-}" ]; then
  flags=()
  [ -n "${SCHEDULER_KAFKA_BOOTSTRAP:-}" ] && flags+=(--no-kafka)
  [ -n "${SCHEDULER_CASSANDRA_HOSTS:-}" ] && flags+=(--no-cassandra)
  .venv/bin/scheduler services up "${flags[@]}"
  started_here=1
fi
if [ "${CI:-}" = "true" ] && [ "$started_here" = 1 ]; then
  trap '.venv/bin/scheduler services down || true' EXIT
fi

# The dashboard's browser tests drive Debian's chromium through chromedriver.
bash scripts/browser.sh
# The peer bench's smoke tests run Celery on Redis and db-scheduler/Quartz on PostgreSQL.
bash scripts/bench-peers.sh

.venv/bin/ruff check scheduler tests
.venv/bin/python -m pytest -q -rfEsxX --strict-markers "$@"
