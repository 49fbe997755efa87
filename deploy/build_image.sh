#!/usr/bin/env bash
# Build the costlib Beam SDK image (deploy/Dockerfile) from one git commit and tag it with
# that commit's sha. The build context is `git archive` of the commit, so uncommitted changes
# never end up in an image that claims a sha.
#
#   deploy/build_image.sh                      # docker build, local tag costlib-beam:<sha>
#   IMAGE_REPO=europe-docker.pkg.dev/PROJECT/REPO/costlib-beam deploy/build_image.sh --push
#   IMAGE_REPO=... deploy/build_image.sh --cloud-build   # gcloud builds submit, no local docker
#
# Env: IMAGE_REPO (default costlib-beam), GIT_REF (default HEAD).
# Prints the full image reference on the last line (used by the other deploy scripts).
set -euo pipefail

cd "$(git rev-parse --show-toplevel)"
IMAGE_REPO="${IMAGE_REPO:-costlib-beam}"
GIT_REF="${GIT_REF:-HEAD}"
MODE="${1:-}"

SHA="$(git rev-parse --short=12 "${GIT_REF}^{commit}")"
IMAGE="${IMAGE_REPO}:${SHA}"
if [[ "${GIT_REF}" == "HEAD" ]] && ! git diff --quiet HEAD --; then
  echo "note: the working tree has uncommitted changes; they are NOT in ${IMAGE}" >&2
fi

CONTEXT="$(mktemp -d)/costlib-${SHA}.tar.gz"
echo "+ git archive --format=tar.gz -o ${CONTEXT} ${SHA}" >&2
git archive --format=tar.gz -o "${CONTEXT}" "${SHA}"

case "${MODE}" in
  ""|--push)
    echo "+ docker build -f deploy/Dockerfile -t ${IMAGE} - < ${CONTEXT}" >&2
    docker build -f deploy/Dockerfile -t "${IMAGE}" - < "${CONTEXT}"
    if [[ "${MODE}" == "--push" ]]; then
      echo "+ docker push ${IMAGE}" >&2
      docker push "${IMAGE}"
    fi
    ;;
  --cloud-build)
    echo "+ gcloud builds submit ${CONTEXT} --config deploy/cloudbuild.yaml" \
         "--substitutions=_IMAGE=${IMAGE}" >&2
    gcloud builds submit "${CONTEXT}" --config deploy/cloudbuild.yaml \
      --substitutions="_IMAGE=${IMAGE}"
    ;;
  *)
    echo "usage: $0 [--push|--cloud-build]" >&2
    exit 2
    ;;
esac
echo "${IMAGE}"
