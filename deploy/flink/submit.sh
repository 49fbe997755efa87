#!/usr/bin/env bash
# Submit `costlib recalibrate` to the Flink session cluster through Beam's Flink job server
# (deploy/flink/flink-session.yaml, deploy/flink/beam-job-server.yaml).
#
#   deploy/flink/submit.sh --config=/data/config/costlib.yaml \
#       --input='/data/scores/dt=2026-11-21/*.parquet' --output=/data/recalibrate \
#       [--run-id=ID] [--max-threshold-change=X] [--min-rated=N] [any costlib recalibrate flag]
#
# The arguments are costlib recalibrate's; this script adds the Beam flags that send the
# pipeline to Flink. Run it where the job server's Service and the data are reachable: in the
# cluster, in the costlib image, with /data mounted (the CronJob does; for a one-off run see
# deploy/README.md, "Flink").
#
# Env: JOB_SERVER (default beam-flink-job-server, the Service), JOB_PORT (8099),
#   ARTIFACT_PORT (8098); ENVIRONMENT_TYPE (EXTERNAL) and ENVIRONMENT_CONFIG
#   (localhost:50000, the Beam worker pool container beside each task manager); COSTLIB
#   (default: costlib on PATH); DRY_RUN=1 prints the command without running it.
#
# Exit codes are costlib's: 0 published, 2 bad config or input, 3 complete but held for
# review by the publish guard (LATEST not moved); anything else: the run failed.
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: $0 --config=C --input=GLOBS --output=DIR [costlib recalibrate flags]" >&2
  exit 2
fi
JOB_SERVER="${JOB_SERVER:-beam-flink-job-server}"
ENVIRONMENT_TYPE="${ENVIRONMENT_TYPE:-EXTERNAL}"

cmd=("${COSTLIB:-costlib}" recalibrate "$@"
     --runner=PortableRunner
     --job_endpoint="${JOB_SERVER}:${JOB_PORT:-8099}"
     --artifact_endpoint="${JOB_SERVER}:${ARTIFACT_PORT:-8098}"
     --environment_type="${ENVIRONMENT_TYPE}")
if [[ "${ENVIRONMENT_TYPE}" != "LOOPBACK" ]]; then
  cmd+=(--environment_config="${ENVIRONMENT_CONFIG:-localhost:50000}")
fi

printf '+' >&2; printf ' %q' "${cmd[@]}" >&2; echo >&2
if [[ "${DRY_RUN:-0}" == "1" ]]; then
  exit 0
fi
rc=0
"${cmd[@]}" || rc=$?
if [[ ${rc} -eq 3 ]]; then
  echo "HELD FOR REVIEW: the run is complete but the publish guard kept LATEST where it was" \
       "(violations above and in the run's manifest.json). After review, publish it with" \
       "costlib publish --output OUTPUT --run-id RUN_ID --by NAME --reason TEXT" >&2
fi
exit "${rc}"
