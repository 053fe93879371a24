#!/usr/bin/env bash
# `make deploy-check`: renders every kustomize overlay under DEPLOY_DIR/k8s/overlays/ and validates
# each object offline (deploy/check/validate.py): built-in kinds against the Kubernetes JSON
# schemas bundled in the pinned `kubernetes-validate` package, custom kinds against
# DEPLOY_DIR/schemas/, strictly; a kind with no schema fails. Then each overlay's alert rules
# (its PrometheusRule, extracted by deploy/check/rules.py) go through `promtool check rules` and
# `promtool test rules` with DEPLOY_DIR/monitoring/alerts.test.yaml, or the overlay's own
# alerts.test.yaml when it has one (promtool from deploy/local/ensure-prometheus.sh), and
# deploy/check/alerts.py requires every alert to be tested firing and quiet and to have its
# section in docs/runbook.md. deploy/check/connections.py budgets each overlay's database
# connections: every service's pool (ROVER_DATABASE__MAX_CONNECTIONS) times its maximum replicas
# must fit the max_connections its ConfigMap rover-postgres-budget states, with the connections
# kept for migrations and operators. Exits non-zero on any problem.
#
#   deploy/check.sh [DEPLOY_DIR]      (default: the deploy/ folder this script is in)
#   deploy/check.sh --rules OUT       only write the base's alert rules, as a Prometheus rule file,
#                                     to OUT (for `make observe` and the tests that run Prometheus)
#
# The validator's virtualenv lives in target/deploy-check/venv and is made on first use from
# deploy/check/requirements.txt (PyPI); a lock makes concurrent first runs safe.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rules_out=""
if [ "${1:-}" = "--rules" ]; then
  [ -n "${2:-}" ] || { echo "deploy-check: --rules needs an output file" >&2; exit 2; }
  rules_out="$2"
  shift 2
fi
repo="$(dirname "$here")"
deploy_dir="$(cd "${1:-$here}" && pwd)"
k8s_version="${ROVER_DEPLOY_K8S_VERSION:-1.32}"
state="${ROVER_DEPLOY_CHECK_DIR:-$repo/target/deploy-check}"
venv="$state/venv"
requirements="$here/check/requirements.txt"

die() { echo "deploy-check: $*" >&2; exit 2; }

command -v kubectl >/dev/null 2>&1 \
  || die "kubectl (with its built-in kustomize, v1.27 or later) is required to render the overlays; install the kubectl package"
command -v python3 >/dev/null 2>&1 || die "python3 (3.9 or later, with venv) is required for the validator"
command -v flock >/dev/null 2>&1 || die "flock (util-linux) is required"

# The virtualenv, made once per requirements file; its stamp names the file's hash.
mkdir -p "$state"
stamp="$venv/.rover-requirements-$(sha256sum "$requirements" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  exec 9>"$state/venv.lock"
  flock 9
  if [ ! -f "$stamp" ]; then
    echo "deploy-check: installing the validator into $venv (once)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv failed (on Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" \
      || { rm -rf "$venv"; die "failed to install $requirements from the package registry"; }
    touch "$stamp"
  fi
  flock -u 9
  exec 9>&-
fi

render="$(mktemp -d)"
trap 'rm -rf "$render"' EXIT
if [ -n "$rules_out" ]; then
  kubectl kustomize "$deploy_dir/k8s/base" >"$render/base.yaml"
  exec "$venv/bin/python" "$here/check/rules.py" "$render/base.yaml" "$rules_out"
fi
shopt -s nullglob
overlays=("$deploy_dir"/k8s/overlays/*/)
[ "${#overlays[@]}" -gt 0 ] || die "no overlays in $deploy_dir/k8s/overlays/"

rendered=()
status=0
for overlay in "${overlays[@]}"; do
  name="$(basename "$overlay")"
  if kubectl kustomize "$overlay" >"$render/$name.yaml" 2>"$render/$name.err"; then
    rendered+=("$name=$render/$name.yaml")
  else
    echo "FAIL $name: kubectl kustomize ${overlay%/} failed:"
    sed 's/^/  /' "$render/$name.err"
    status=1
  fi
done

if [ "${#rendered[@]}" -gt 0 ]; then
  "$venv/bin/python" "$here/check/validate.py" \
    --k8s-version "$k8s_version" --schemas "$deploy_dir/schemas" "${rendered[@]}" || status=1
  # The database connections: every service's pool times its maximum replicas (plus the rollout's
  # surge), the reserved and the superuser-reserved ones fit the server's max_connections.
  "$venv/bin/python" "$here/check/connections.py" "${rendered[@]}" || status=1
fi
# The alerts: each overlay's PrometheusRule groups, as rendered, through promtool — its own check,
# then its unit tests (every alert firing and not).
promtool=""
if [ "${#rendered[@]}" -gt 0 ]; then
  bin="$("$here/local/ensure-prometheus.sh")" || die "promtool is required (Debian's prometheus package)"
  promtool="$bin/promtool"
fi
for entry in "${rendered[@]}"; do
  name="${entry%%=*}"
  rules="$render/rules-$name"
  mkdir -p "$rules"
  if ! "$venv/bin/python" "$here/check/rules.py" "${entry#*=}" "$rules/rover.rules.yaml"; then
    echo "FAIL $name: no alert rules rendered"
    status=1
    continue
  fi
  if ! "$promtool" check rules "$rules/rover.rules.yaml" >"$rules/check.out" 2>&1; then
    echo "FAIL $name: promtool check rules:"
    sed 's/^/  /' "$rules/check.out"
    status=1
    continue
  fi
  # An overlay that changes a threshold carries its own tests (k8s/overlays/<name>/alerts.test.yaml,
  # docs/runbook.md *Thresholds*); every other overlay is tested with the base's.
  tests="$deploy_dir/monitoring/alerts.test.yaml"
  [ -f "$deploy_dir/k8s/overlays/$name/alerts.test.yaml" ] && tests="$deploy_dir/k8s/overlays/$name/alerts.test.yaml"
  shown="${tests#"$deploy_dir"/}"
  cp "$tests" "$rules/alerts.test.yaml"
  if (cd "$rules" && "$promtool" test rules alerts.test.yaml >"$rules/test.out" 2>&1); then
    echo "deploy-check: $name: alert rules pass promtool check rules and every unit test ($shown)"
  else
    echo "FAIL $name: promtool test rules $shown:"
    sed 's/^/  /' "$rules/test.out"
    status=1
  fi
  # What promtool cannot see: each alert tested firing and quiet, each with its runbook section.
  if ! "$venv/bin/python" "$here/check/alerts.py" "$rules/rover.rules.yaml" "$rules/alerts.test.yaml" \
    "$repo/docs/runbook.md" >"$rules/alerts.out" 2>&1; then
    echo "FAIL $name: alerts untested or without a runbook section ($shown, docs/runbook.md):"
    sed 's/^/  /' "$rules/alerts.out"
    status=1
  fi
done

if [ "$status" -ne 0 ]; then
  echo "deploy-check: FAILED"
else
  echo "deploy-check: every overlay renders and validates"
fi
exit "$status"
