#!/usr/bin/env bash
# `make observe`: Debian's Prometheus, in the foreground until Ctrl-C, scraping the services of
# `make run` (run that in another terminal) with the very alert rules the cluster gets — the
# PrometheusRule in deploy/k8s/base/monitoring.yaml, extracted by `deploy/check.sh --rules`.
# The UI is at http://127.0.0.1:9099 (Prometheus's usual 9090 is the gateway's metrics port);
# Status → Targets shows the three services, Alerts the rules, and Graph takes the queries of
# deploy/grafana/rover-turns.json.
#
# Settings (environment): ROVER_OBSERVE_LISTEN (127.0.0.1:9099), ROVER_OBSERVE_DIR (target/observe:
# the config, the rules and the data), ROVER_OBSERVE_INTERVAL (scrape and rule interval, 5s), and
# the scrape targets ROVER_OBSERVE_GATEWAY (127.0.0.1:9090, the gateway's metrics listener),
# ROVER_OBSERVE_WORKER (127.0.0.1:9091), ROVER_OBSERVE_TOOLSERVER (127.0.0.1:9092).
set -euo pipefail
cd "$(dirname "$0")/../.."

listen="${ROVER_OBSERVE_LISTEN:-127.0.0.1:9099}"
dir="${ROVER_OBSERVE_DIR:-target/observe}"
interval="${ROVER_OBSERVE_INTERVAL:-5s}"
mkdir -p "$dir/data"
bin="$(deploy/local/ensure-prometheus.sh)"
deploy/check.sh --rules "$dir/rover.rules.yaml"
cat >"$dir/prometheus.yml" <<YAML
# Written by deploy/local/observe.sh; rewritten on every start.
global:
  scrape_interval: $interval
  evaluation_interval: $interval
rule_files:
  - rover.rules.yaml
scrape_configs:
  - job_name: rover-gateway
    static_configs:
      - targets: ['${ROVER_OBSERVE_GATEWAY:-127.0.0.1:9090}']
  - job_name: rover-worker
    static_configs:
      - targets: ['${ROVER_OBSERVE_WORKER:-127.0.0.1:9091}']
  - job_name: rover-toolserver
    static_configs:
      - targets: ['${ROVER_OBSERVE_TOOLSERVER:-127.0.0.1:9092}']
YAML
echo "rover: Prometheus at http://$listen/ scraping make run's services every $interval, with the alert rules (Ctrl-C stops it)" >&2
exec "$bin/prometheus" \
  --config.file="$dir/prometheus.yml" \
  --storage.tsdb.path="$dir/data" \
  --web.listen-address="$listen" \
  --log.level=warn
