#!/usr/bin/env bash
# Launch the costlib recalibrate Flex Template (built by deploy/dataflow/build_template.sh).
#
#   PROJECT=my-project REGION=europe-west1 TEMP_LOCATION=gs://BUCKET/tmp \
#   TEMPLATE_SPEC=gs://BUCKET/templates/costlib-recalibrate-SHA.json \
#   SDK_IMAGE=europe-docker.pkg.dev/PROJECT/REPO/costlib-flex:SHA \
#   CONFIG=gs://BUCKET/costlib/config.yaml INPUT='gs://BUCKET/scores/dt=2026-11-21/*.parquet' \
#   WORKER_SA=costlib-worker@PROJECT.iam.gserviceaccount.com \
#   OUTPUT=gs://BUCKET/costlib/recalibrate deploy/dataflow/launch.sh
#
# Required env: PROJECT REGION TEMP_LOCATION TEMPLATE_SPEC SDK_IMAGE WORKER_SA CONFIG INPUT
#   OUTPUT.
# Optional env (template parameters, empty = not passed): RUN_ID MAX_THRESHOLD_CHANGE
#   MIN_RATED OVERRIDE_GUARD(=true) OVERRIDE_BY OVERRIDE_REASON; JOB_NAME; MAX_WORKERS;
#   LAUNCHER_SA (gcloud impersonates it); DRY_RUN=1 prints the command without running it.
#
# The launcher builds and submits the job and returns; it does not wait. The job publishes
# itself: its last stage checks the row accounting, applies the publish guard, writes the
# run's manifest.json and moves LATEST, or holds the run for review (manifest "published":
# false). Nobody sees an exit code 3 here: run `costlib status --output OUTPUT` (exit 3 = held,
# stale or broken) after the job ends, or read the run's manifest.json. See deploy/README.md.
set -euo pipefail

for var in PROJECT REGION TEMP_LOCATION TEMPLATE_SPEC SDK_IMAGE WORKER_SA CONFIG INPUT OUTPUT; do
  if [[ -z "${!var:-}" ]]; then
    echo "launch.sh: error: set ${var} (see the header of $0)" >&2
    exit 2
  fi
done
JOB_NAME="${JOB_NAME:-costlib-recalibrate-$(date -u +%Y%m%d-%H%M%S)}"

# Parameters use '~' as the list delimiter (gcloud's ^~^ escaping), because INPUT may hold
# commas (several globs).
params="^~^config=${CONFIG}~input=${INPUT}~output=${OUTPUT}"
params+="~sdk_container_image=${SDK_IMAGE}"
declare -A optional=(
  [run_id]="${RUN_ID:-}"
  [max_threshold_change]="${MAX_THRESHOLD_CHANGE:-}"
  [min_rated]="${MIN_RATED:-}"
  [override_guard]="${OVERRIDE_GUARD:-}"
  [override_by]="${OVERRIDE_BY:-}"
  [override_reason]="${OVERRIDE_REASON:-}"
)
for name in run_id max_threshold_change min_rated override_guard override_by override_reason; do
  if [[ -n "${optional[$name]}" ]]; then
    params+="~${name}=${optional[$name]}"
  fi
done

cmd=(gcloud dataflow flex-template run "${JOB_NAME}"
     --project "${PROJECT}"
     --region "${REGION}"
     --template-file-gcs-location "${TEMPLATE_SPEC}"
     --temp-location "${TEMP_LOCATION}"
     --service-account-email "${WORKER_SA}"
     --parameters "${params}")
if [[ -n "${MAX_WORKERS:-}" ]]; then
  cmd+=(--max-workers "${MAX_WORKERS}")
fi
if [[ -n "${LAUNCHER_SA:-}" ]]; then
  cmd+=(--impersonate-service-account "${LAUNCHER_SA}")
fi
printf '+' >&2; printf ' %q' "${cmd[@]}" >&2; echo >&2
if [[ "${DRY_RUN:-0}" == "1" ]]; then
  exit 0
fi
"${cmd[@]}"
echo "launched ${JOB_NAME}: gcloud dataflow jobs list --project ${PROJECT} --region ${REGION} --filter=name=${JOB_NAME}" >&2
echo "the job writes ${OUTPUT}/runs/<run id>/ and publishes or holds it when it ends;" \
     "then check: costlib status --output ${OUTPUT}" >&2
