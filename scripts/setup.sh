#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install the project with the extras the README's commands use:
# spark (PySpark: the spark executors and the example), dev (tests, linters) and bench.
# Idempotent: a second run only checks that everything is installed.
#
# Quiet: the install's output goes to a log file that is printed in full only if a step fails.
# The last line says what is ready and what to run next.
#
#   --java WHY    stop before installing unless Java 17 or newer is found (JAVA_HOME, else `java`
#                 on PATH, as Spark looks for it); WHY says what needs it. Without --java, Java is
#                 only reported: the command and no-op executors never need it.
#   --next WHAT   what the calling script does next, for the last line.
set -euo pipefail
cd "$(dirname "$0")/.."

java_for="" next=""
while [ $# -gt 0 ]; do
  case "$1" in
    --java) java_for=${2:?--java needs a reason}; shift 2 ;;
    --next) next=${2:?--next needs a text}; shift 2 ;;
    *) echo "setup.sh: unknown argument $1 (use --java WHY, --next WHAT)" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  found=$("$python" --version 2>&1 || echo "no $python")
  echo "error: Python 3.11 or newer is needed (found: $found); install it or set PYTHON=/path/to/python3.11" >&2
  exit 2
fi

# The Java Spark would start: $JAVA_HOME/bin/java, else `java` on PATH. Prints "path major".
find_java() {
  local java=""
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    java=$JAVA_HOME/bin/java
  else
    java=$(command -v java || true)
  fi
  [ -n "$java" ] || return 1
  local major
  major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\)\.\{0,1\}\([0-9]*\).*/\1 \2/p' | head -1)
  # "1.8.0" is Java 8; "17.0.15" is 17.
  set -- $major
  if [ "${1:-0}" = 1 ]; then echo "$java ${2:-0}"; else echo "$java ${1:-0}"; fi
}

java_ok=0 java_path="" java_major=0
java_note="no Java (only Spark and the local Kafka/Cassandra servers need it)"
if found=$(find_java); then
  java_path=${found% *} java_major=${found##* }
  if [ "$java_major" -ge 17 ]; then
    java_ok=1 java_note="Java $java_major"
  else
    java_note="Java $java_major at $java_path (Spark and the local servers need 17)"
  fi
fi
if [ -n "$java_for" ] && [ "$java_ok" = 0 ]; then
  if [ -n "$java_path" ]; then
    have="found only Java $java_major at $java_path"
  else
    have="found no java (JAVA_HOME is unset or has no bin/java, and none is on PATH)"
  fi
  echo "error: $java_for, which needs Java 17 or newer; $have." >&2
  echo "       Install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless) or set JAVA_HOME to it." >&2
  exit 2
fi

log=$(mktemp "${TMPDIR:-/tmp}/scheduler-setup.XXXXXX.log")
# Run a step with its output in the log; on failure print the whole log and stop.
step() {
  local what=$1
  shift
  if ! "$@" >>"$log" 2>&1; then
    echo "error: $what failed; its output (also in $log):" >&2
    cat "$log" >&2
    echo "error: $what failed (command: $*); the output is above and in $log" >&2
    exit 1
  fi
}

[ -x .venv/bin/python ] || step "creating .venv with $python" "$python" -m venv .venv
# The C path (scheduler/_speedups.c) is compiled by the install: a change to it installs again.
stamp=.venv/.installed-$(cat pyproject.toml scheduler/_speedups.c | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  echo "setup: installing the project into .venv (a minute or more the first time)..."
  step "upgrading pip" .venv/bin/python -m pip install --disable-pip-version-check --upgrade pip
  step "installing the project" .venv/bin/python -m pip install --disable-pip-version-check \
    -e '.[spark,dev,bench]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
rm -f "$log"

if .venv/bin/python -c 'import scheduler._speedups' 2>/dev/null; then
  speedups="C speedups built"
else
  speedups="no C speedups (no C compiler found; the Python path is used)"
fi
version=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("scheduler"))')
echo "setup: ready: .venv has scheduler $version with the spark, dev and bench extras, $speedups; $java_note; next: ${next:-bash scripts/example.sh (the example pipeline) or .venv/bin/scheduler --help}"
