#!/usr/bin/env bash
# Runs Rover's three services in the foreground against the local broker and database, with
# human-readable logs, until Ctrl-C. `make run` calls it after building.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=target/debug
pids=()
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait
}
trap stop INT TERM EXIT
for service in rover-toolserver rover-worker rover-gateway; do
  "$bin/$service" &
  pids+=("$!")
done
echo "rover: the three services are running; Ctrl-C stops them." >&2
wait -n
