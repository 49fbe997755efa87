#!/usr/bin/env bash
# One day of scheduled recalibration (deploy/kubernetes/recalibration-cronjob.yaml): the
# look-back window of daily input partitions ending on the logical date and a run id named
# after that date, then deploy/flink/submit.sh with this script's arguments (the other
# costlib recalibrate flags: --config, --output, the publish guard's limits).
#
# Env: INPUT_PATTERN (required; a glob with {date} for the partition's YYYY-MM-DD, e.g.
#   /data/scores/dt={date}/*.parquet); LOGICAL_DATE (default: yesterday, UTC; the last day of
#   the window); LOOKBACK_DAYS (default 7); everything submit.sh reads (JOB_SERVER, DRY_RUN...).
#
# The run id is daily-<YYYYMMDD of LOGICAL_DATE>: a retry of the same day replaces that day's
# run directory instead of adding a second run; earlier days' runs stay under OUTPUT/runs/.
set -euo pipefail

: "${INPUT_PATTERN:?set INPUT_PATTERN, a glob with {date}, e.g. /data/scores/dt={date}/*.parquet}"
LOGICAL_DATE="${LOGICAL_DATE:-$(date -u -d yesterday +%Y-%m-%d)}"
LOOKBACK_DAYS="${LOOKBACK_DAYS:-7}"

globs=()
for ((i = LOOKBACK_DAYS - 1; i >= 0; i--)); do
  day="$(date -u -d "${LOGICAL_DATE} -${i} days" +%Y-%m-%d)"
  globs+=("${INPUT_PATTERN//\{date\}/${day}}")
done
input="$(IFS=,; echo "${globs[*]}")"
run_id="daily-$(date -u -d "${LOGICAL_DATE}" +%Y%m%d)"
echo "recalibration for ${LOGICAL_DATE}: ${LOOKBACK_DAYS} days of partitions, run id ${run_id}" >&2
exec "$(dirname "$0")/../flink/submit.sh" --input="${input}" --run-id="${run_id}" "$@"
