#!/usr/bin/env bash
# Install, start Kafka and Cassandra on 127.0.0.1 (fetched from Maven Central unless
# SCHEDULER_KAFKA_BOOTSTRAP / SCHEDULER_CASSANDRA_HOSTS point at running servers), install the
# headless browser of the dashboard's tests (scripts/browser.sh) and the peer schedulers' servers
# of the bench smoke tests (scripts/bench-peers.sh), then run the whole test suite. Extra
# arguments go to pytest.
#
# --containers (or SCHEDULER_TEST_CONTAINERS=1): then once more the distributed contract suite
# (tests/contracts), the compose tests (the example pipeline on two workers; killed, paused and
# limited containers under load), on Kafka and Cassandra containers started by
# testcontainers from the project's own images, which scripts/containers.sh builds first
# (installing and starting a Docker engine where it can; docs/containers.md). Without it the
# tests marked `containers` are left out.
# Needs Java 17 (the Spark tests, and the local servers): said before anything is installed when
# it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
containers=${SCHEDULER_TEST_CONTAINERS:-0}

# Each phase's wall time, printed as it ends and once more as a table at the end (also when a
# phase fails): the CI's time budget (README, "Developing") is kept by looking at these. On
# stderr, like the other progress lines: stdout stays for what a command was asked for.
phases=()
phase_began=$SECONDS phase_name=""
begin() {
  end_phase
  phase_name=$1 phase_began=$SECONDS
}
end_phase() {
  if [ -n "$phase_name" ]; then
    local took=$((SECONDS - phase_began))
    phases+=("$(printf '%5d s  %s' "$took" "$phase_name")")
    echo "test: $phase_name took $took s" >&2
    phase_name=""
  fi
}
report_phases() {
  end_phase
  echo "test: wall time by phase (total $SECONDS s):" >&2
  printf '  %s\n' "${phases[@]}" >&2
}
trap report_phases EXIT
if [ "${1:-}" = "--containers" ]; then
  containers=1
  shift
fi
begin "install (scripts/setup.sh)"
bash scripts/setup.sh \
  --java "the test suite runs Spark jobs and starts Kafka and Cassandra servers (JVMs)" \
  --next "checking the servers, then ruff, mypy, the import contracts and pytest"

started_here=0 servers_up=""
if [ -z "${SCHEDULER_KAFKA_BOOTSTRAP:-}" ] || [ -z "${SCHEDULER_CASSANDRA_HOSTS:-}" ]; then
  flags=()
  [ -n "${SCHEDULER_KAFKA_BOOTSTRAP:-}" ] && flags+=(--no-kafka)
  [ -n "${SCHEDULER_CASSANDRA_HOSTS:-}" ] && flags+=(--no-cassandra)
  # The servers start in the background, beside the browser, the peers' servers and the
  # linters, none of which uses them; the main pass waits for them first (`Kafka and Cassandra
  # up (waited for)`), and says what the start printed.
  mkdir -p "${SCHEDULER_SERVICES_DIR:-.services}"
  servers_up_log="${SCHEDULER_SERVICES_DIR:-.services}/servers-up.log"
  .venv/bin/scheduler services up "${flags[@]}" > "$servers_up_log" 2>&1 &
  servers_up=$!
  started_here=1
  # Named, so that the tests use these servers even where a Docker engine would answer
  # (tests/servers.py tries testcontainers before the launcher).
  export SCHEDULER_KAFKA_BOOTSTRAP=${SCHEDULER_KAFKA_BOOTSTRAP:-127.0.0.1:${SCHEDULER_SERVICES_KAFKA_PORT:-9092}}
  export SCHEDULER_CASSANDRA_HOSTS=${SCHEDULER_CASSANDRA_HOSTS:-127.0.0.1:${SCHEDULER_SERVICES_CASSANDRA_PORT:-9042}}
fi
# Under CI, servers this script started are thrown away with the clean clone.
throwaway_servers=0
if [ "${CI:-}" = "true" ] && [ "$started_here" = 1 ]; then throwaway_servers=1; fi
if [ "$throwaway_servers" = 1 ]; then
  # A run that fails before the main pass waits for the servers' start before stopping them.
  trap 'report_phases; [ -z "$servers_up" ] || wait "$servers_up" || true
    .venv/bin/scheduler services down || true' EXIT
  # No phase after the main pass uses these servers, and CI's clean clone throws their data
  # dir away: the CLI tests leave their keyspaces on the node instead of dropping them at the
  # session's end (tests/cli/conftest.py, `_drop_keyspaces`: some 40 s).
  export KEEP_CLI_TEST_KEYSPACES=1
fi

begin "browser and peer servers installed"
# The dashboard's browser tests drive Debian's chromium through chromedriver.
bash scripts/browser.sh
# The peer bench's smoke tests run Celery on Redis and db-scheduler/Quartz on PostgreSQL.
bash scripts/bench-peers.sh

begin "ruff, mypy, import contracts"
.venv/bin/ruff check scheduler tests
# Types and layers (docs/architecture.md, "Layers and types"): either failing fails the run.
.venv/bin/mypy
.venv/bin/lint-imports --no-logo
# Without arguments the main pass is two: the tests that need neither a server nor long, two
# at a time (pytest-xdist; they share no server, port or file: tests/servers.py fails one that
# reaches a server unmarked), while the servers still start; then the server and slow tests one
# at a time, since their fleets and timings assume the machine's two cores.
unit_tests="not slow and not kafka and not cassandra and not containers and not chaos"
if [ $# = 0 ]; then
  begin "main pass: unit tests, two at a time (pytest -n 2)"
  .venv/bin/python -m pytest -q -rfEsxX --strict-markers --durations=30 -n 2 -m "$unit_tests"
fi
if [ -n "$servers_up" ]; then
  begin "Kafka and Cassandra up (waited for)"
  up_status=0
  wait "$servers_up" || up_status=$?
  servers_up=""
  cat "$servers_up_log"
  [ "$up_status" = 0 ] || { echo "test: scheduler services up failed (above)" >&2; exit "$up_status"; }
fi
if [ $# = 0 ]; then
  begin "main pass: server and slow tests (pytest)"
  .venv/bin/python -m pytest -q -rfEsxX --strict-markers --durations=100 \
    -m "not containers and not chaos and not ($unit_tests)"
else
  begin "main pass (pytest)"
  # A -m among the arguments replaces this one (pytest keeps the last).
  .venv/bin/python -m pytest -q -rfEsxX --strict-markers --durations=100 -m "not containers" "$@"
fi
if [ "$throwaway_servers" = 1 ]; then
  # No later phase uses these servers (chaos has its own cluster, the containers pass its own
  # containers): they stop in the background, beside those phases, and are waited for at the
  # end (`servers down (waited for)`) instead of being stopped after everything else.
  .venv/bin/scheduler services down > "${SCHEDULER_SERVICES_DIR:-.services}/servers-down.log" 2>&1 &
  servers_down=$!
  trap 'report_phases; [ -z "$servers_down" ] || wait "$servers_down" || true' EXIT
fi

# The short chaos round (issue 45, docs/reliability.md) on the replicated cluster, which is up
# for it alone: three brokers and three Cassandra nodes beside the servers above. About 7 min
# with the cluster's start. SCHEDULER_TEST_CHAOS=0 leaves it out.
if [ "${SCHEDULER_TEST_CHAOS:-1}" = 1 ]; then
  begin "chaos: the cluster up"
  .venv/bin/scheduler services up --cluster
  begin "chaos: the round (pytest -m chaos)"
  chaos_status=0
  .venv/bin/python -m pytest -q -rfEsxX --strict-markers --durations=10 -m chaos tests/chaos || chaos_status=$?
  end_phase
  # Stopping six JVMs takes about a minute, mostly waiting for them to exit: it runs in the
  # background, beside the container phase (whose servers take other, free ports), and is
  # waited for at the end.
  .venv/bin/scheduler services down --cluster > "${SCHEDULER_SERVICES_DIR:-.services}/cluster-down.log" 2>&1 &
  cluster_down=$!
  [ "$chaos_status" = 0 ] || { wait "$cluster_down" || true; exit "$chaos_status"; }
fi

if [ "$containers" = 1 ]; then
  begin "containers: engine and images (scripts/containers.sh)"
  bash scripts/containers.sh >/dev/null
  begin "containers: the contract suite and compose tests (pytest)"
  # Not the servers above: the variables would win over the containers (tests/servers.py).
  # The secured variants need the launcher's secured servers (TLS files, users), which the run
  # above has covered. The `kafka-python` variant of the log contract differs from `kafka` only
  # in the client (the producer's send in Python instead of C, SCHEDULER_SPEEDUPS=0), not in
  # anything the server does: the main pass has run it, and the containers' broker is covered
  # by `kafka` and `kafka-kip848` (22 tests fewer here).
  env -u SCHEDULER_KAFKA_BOOTSTRAP -u SCHEDULER_CASSANDRA_HOSTS SCHEDULER_TEST_CONTAINERS=1 \
    .venv/bin/python -m pytest -q -rfEsxX --strict-markers -p no:cacheprovider \
    -m "containers or kafka or cassandra" -k "not secured and not kafka-python" \
    tests/contracts tests/services/test_compose.py \
    tests/services/test_images.py
  end_phase
fi
if [ -n "${servers_down:-}" ]; then
  begin "servers down (waited for)"
  # A failed stop does not fail the run (as before, when it was the exit's last step): said.
  wait "$servers_down" || cat "${SCHEDULER_SERVICES_DIR:-.services}/servers-down.log" >&2
  servers_down=""
  end_phase
fi
if [ -n "${cluster_down:-}" ]; then
  begin "chaos: the cluster down (waited for)"
  wait "$cluster_down" || { cat "${SCHEDULER_SERVICES_DIR:-.services}/cluster-down.log" >&2; exit 1; }
  end_phase
fi
