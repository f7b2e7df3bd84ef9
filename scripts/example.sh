#!/usr/bin/env bash
# Install, then run the example data pipeline (hourly and daily PySpark jobs on schedules) on the
# embedded default: one process, the embedded log and a SQLite store under .scheduler/, local Spark.
# Needs Java 17 for Spark: said before anything is installed when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --java "the example pipeline runs PySpark jobs (Spark's driver is a JVM)" \
  --next "running the example pipeline"
exec .venv/bin/scheduler example run "$@"
