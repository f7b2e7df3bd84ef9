#!/usr/bin/env bash
# The fault tests, N rounds in a row (issue 40: "the chaos tests on the real servers run 10 times
# in a row green"; docs/reliability.md, "The fault tests in a row").
#
#   bash scripts/faults.sh [--repeat N] [--only all|distributed|chaos] [--logs DIR] [PYTEST ARGS]
#
# One round is one pytest run of the fault tests:
#   distributed  kill -9 (tests/distributed/test_crash.py), Kafka and Cassandra restarts under
#                load (test_server_restarts.py), workers joining and leaving (test_scaling.py),
#                a worker paused (test_worker_pause.py), on one broker and one Cassandra node;
#   chaos        the short chaos round on the replicated cluster (`-m chaos tests/chaos`, as
#                scripts/test.sh runs it).
# `--only` picks one of the two (default: all, both in one pytest run). The loop stops at the first
# red round; a table (round, passed, failed, seconds, load average at its start and end) is
# printed as each round ends and once more at the end, and the exit status is the red round's
# pytest status (0 when every round was green). Each round's pytest output is kept in
# DIR/round-NN.log (default DIR: .faults/<UTC time>/), the table in DIR/table.txt.
#
# Servers, as scripts/test.sh: SCHEDULER_KAFKA_BOOTSTRAP / SCHEDULER_CASSANDRA_HOSTS, when set,
# name the servers of the distributed tests; otherwise `scheduler services up` starts them (and
# leaves them running). The restart tests restart the servers of the launcher whose state dir
# they see (SCHEDULER_SERVICES_DIR, SCHEDULER_SERVICES_*_PORT): never point them at servers
# someone else uses. The chaos part starts the cluster (`scheduler services up --cluster`) once
# before the first round when it is not running, and then takes it down after the last one.
#
# SCHEDULER_FAULTS_PYTEST replaces the round's command (default `.venv/bin/python -m pytest`);
# the script's own tests (tests/test_faults_script.py) run it with a fake one.
set -euo pipefail
cd "$(dirname "$0")/.."

repeat=10 only=all logs="" pytest_args=()
usage() {
  sed -n '4,5p' "$0" | sed 's/^# *//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) repeat=${2:?--repeat needs a number}; shift 2 ;;
    --only) only=${2:?--only needs all, distributed or chaos}; shift 2 ;;
    --logs) logs=${2:?--logs needs a directory}; shift 2 ;;
    -h | --help) usage ;;
    *) pytest_args+=("$1"); shift ;;
  esac
done
case "$repeat" in
  '' | *[!0-9]* | 0)
    echo "faults: --repeat $repeat is not a positive whole number of rounds: say e.g. --repeat 10" >&2
    exit 2 ;;
esac
distributed=(
  tests/distributed/test_crash.py
  tests/distributed/test_server_restarts.py
  tests/distributed/test_scaling.py
  tests/distributed/test_worker_pause.py
)
case "$only" in
  all) selection=(-m "chaos or kafka or cassandra" "${distributed[@]}" tests/chaos) ;;
  distributed) selection=("${distributed[@]}") ;;
  chaos) selection=(-m chaos tests/chaos) ;;
  *)
    echo "faults: --only $only is none of all, distributed, chaos" >&2
    exit 2 ;;
esac
logs=${logs:-.faults/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$logs"
read -r -a round_command <<<"${SCHEDULER_FAULTS_PYTEST:-.venv/bin/python -m pytest}"

# Servers: the one-node ones for the distributed tests, the cluster for the chaos round.
if [ "$only" != chaos ] \
  && { [ -z "${SCHEDULER_KAFKA_BOOTSTRAP:-}" ] || [ -z "${SCHEDULER_CASSANDRA_HOSTS:-}" ]; }; then
  flags=()
  [ -n "${SCHEDULER_KAFKA_BOOTSTRAP:-}" ] && flags+=(--no-kafka)
  [ -n "${SCHEDULER_CASSANDRA_HOSTS:-}" ] && flags+=(--no-cassandra)
  .venv/bin/scheduler services up "${flags[@]}"
  export SCHEDULER_KAFKA_BOOTSTRAP=${SCHEDULER_KAFKA_BOOTSTRAP:-127.0.0.1:${SCHEDULER_SERVICES_KAFKA_PORT:-9092}}
  export SCHEDULER_CASSANDRA_HOSTS=${SCHEDULER_CASSANDRA_HOSTS:-127.0.0.1:${SCHEDULER_SERVICES_CASSANDRA_PORT:-9042}}
fi
cluster_started=0
if [ "$only" != distributed ] && ! .venv/bin/scheduler services status --cluster >/dev/null 2>&1; then
  .venv/bin/scheduler services up --cluster
  cluster_started=1
fi

rows=()
table() {
  {
    printf '%-6s %7s %7s %8s  %s\n' round passed failed seconds "load average (1 min) start / end"
    printf '%s\n' "${rows[@]}"
  } | tee "$logs/table.txt"
}
finish() {
  local status=$?
  if [ "$cluster_started" = 1 ]; then
    .venv/bin/scheduler services down --cluster || true
  fi
  exit "$status"
}
trap finish EXIT

count() {  # count WORD LOG: the number before WORD in pytest's summary line, 0 when absent
  local n
  n=$(tail -n 5 "$2" | grep -oE "[0-9]+ $1" | tail -n 1 | cut -d' ' -f1)
  echo "${n:-0}"
}
load() { cut -d' ' -f1 /proc/loadavg; }

status=0
for ((round = 1; round <= repeat; round++)); do
  log=$(printf '%s/round-%02d.log' "$logs" "$round")
  echo "faults: round $round of $repeat ($only), pytest output in $log" >&2
  began=$SECONDS load_began=$(load)
  "${round_command[@]}" -q -rfEsxX --strict-markers -p no:cacheprovider \
    "${selection[@]}" ${pytest_args[@]+"${pytest_args[@]}"} >"$log" 2>&1 || status=$?
  passed=$(count passed "$log")
  failed=$(($(count failed "$log") + $(count "errors?" "$log")))
  if [ "$status" != 0 ] && [ "$failed" = 0 ]; then
    failed="?"  # pytest failed without a summary (interrupted, collection error): see the log
  fi
  rows+=("$(printf '%-6s %7s %7s %8d  %s / %s' "$round" "$passed" "$failed" \
    $((SECONDS - began)) "$load_began" "$(load)")")
  echo "faults: ${rows[-1]}" >&2
  if [ "$status" != 0 ]; then
    echo "faults: round $round is red (pytest exit $status): read $log" >&2
    break
  fi
done
table
if [ "$status" = 0 ]; then
  echo "faults: $repeat of $repeat rounds green" >&2
else
  echo "faults: stopped at red round $round; $((round - 1)) green before it" >&2
fi
exit "$status"
