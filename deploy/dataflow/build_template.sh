#!/usr/bin/env bash
# Build the Flex Template image (deploy/dataflow/Dockerfile, on top of the costlib SDK image)
# and write the template spec to GCS with `gcloud dataflow flex-template build`.
#
#   COSTLIB_IMAGE=europe-docker.pkg.dev/PROJECT/REPO/costlib-beam:SHA \
#   TEMPLATE_SPEC=gs://BUCKET/templates/costlib-recalibrate-SHA.json \
#   deploy/dataflow/build_template.sh
#
# Env: COSTLIB_IMAGE (required; from deploy/build_image.sh), TEMPLATE_SPEC (required, gs://),
#      FLEX_IMAGE (default: COSTLIB_IMAGE with costlib-beam -> costlib-flex).
set -euo pipefail

cd "$(git rev-parse --show-toplevel)"
: "${COSTLIB_IMAGE:?set COSTLIB_IMAGE to the image deploy/build_image.sh printed}"
: "${TEMPLATE_SPEC:?set TEMPLATE_SPEC to a gs:// path for the template spec JSON}"
FLEX_IMAGE="${FLEX_IMAGE:-${COSTLIB_IMAGE/costlib-beam/costlib-flex}}"

run() { echo "+ $*" >&2; "$@"; }

run docker build -f deploy/dataflow/Dockerfile --build-arg "COSTLIB_IMAGE=${COSTLIB_IMAGE}" \
  -t "${FLEX_IMAGE}" deploy/dataflow
run docker push "${FLEX_IMAGE}"
run gcloud dataflow flex-template build "${TEMPLATE_SPEC}" \
  --image "${FLEX_IMAGE}" \
  --sdk-language PYTHON \
  --metadata-file deploy/dataflow/metadata.json
echo "template spec: ${TEMPLATE_SPEC} (image ${FLEX_IMAGE})"
