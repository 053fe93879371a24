#!/usr/bin/env bash
# Runs Rover locally, in the foreground, until Ctrl-C: `make run` calls it after building.
#   1. a development Ed25519 key pair for turn identities (target/dev/, made once with openssl);
#   2. the database, its two roles, the schema and the demo schools (`rover-toolserver db setup --demo`,
#      idempotent);
#   3. the scripted model (a test double speaking the OpenAI API) and the three services, each
#      logging to target/dev/logs/<service>.log, so the terminal shows only the narration;
#      with `--model local` (`make run MODEL=local`), llama.cpp's llama-server with
#      Qwen2.5-Coder-1.5B instead of the scripted model, started as `make eval` starts it
#      (scripts/llama-server.sh; built and fetched once into ~/.cache/rover/llama, about 14
#      minutes the first time), logging to target/dev/logs/llama-server.log, and the worker
#      pointed at it with its prompt-cache warm-up on (model.warm_prompt_cache);
#   4. one demo turn through the gateway, narrated as the Hub would show it (a new department
#      each run: Sciences, then Sciences 2, …, so a second run succeeds too);
#   5. the Hub console (built by `make console`) at http://127.0.0.1:8080/ — the gateway's default
#      http.console_dir, console/dist, is relative to this directory. (Not exported as
#      ROVER_HTTP__CONSOLE_DIR: an `http` table in the environment would replace the other
#      services' default listen addresses.)
# Ctrl-C stops everything and exits 0.
#
# With `--cluster` (`make cluster`), the services run against the three-node RabbitMQ cluster of
# scripts/rabbitmq-cluster.sh (started and joined first; left running after Ctrl-C, stopped by
# `scripts/rabbitmq-cluster.sh stop`) instead of the default node: they are given every node's
# address (amqp.addresses) and a quorum tools queue (amqp.tools_queue), as in production.
#
#   deploy/local/run.sh [--model scripted|local] [--cluster]   (scripted when not given)
set -euo pipefail
cd "$(dirname "$0")/../.."
model=scripted
cluster=false
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=${2:-scripted}; shift ;;
    --model=*) model=${1#--model=} ;;
    --cluster) cluster=true ;;
    *) echo "usage: deploy/local/run.sh [--model scripted|local] [--cluster]" >&2; exit 2 ;;
  esac
  shift
done
case "$model" in
  scripted | local) ;;
  *) echo "rover: no model called '$model': MODEL=scripted (the default) or MODEL=local" >&2; exit 2 ;;
esac
bin=target/debug
dev=target/dev
mkdir -p "$dev"

if [ ! -f "$dev/turn-identity.pem" ]; then
  openssl genpkey -algorithm ed25519 -out "$dev/turn-identity.pem" 2>/dev/null
  openssl pkey -in "$dev/turn-identity.pem" -pubout -out "$dev/turn-identity.pub.pem"
  echo "rover: made a development turn-identity key pair in $dev/" >&2
fi
export ROVER_IDENTITY__PUBLIC_KEY_FILE="$PWD/$dev/turn-identity.pub.pem"
export ROVER_IDENTITY__PRIVATE_KEY_FILE="$PWD/$dev/turn-identity.pem"
export ROVER_AGENT__SKILLS_DIR="$PWD/skills"
export ROVER_AGENT__SANDBOX_DIR="$PWD/$dev/sandboxes"
# Development mode: the gateway accepts HS256 tokens signed with the built-in development secret
# (`rover-gateway token`); without it, it refuses to start with no secret configured.
export ROVER_AUTH__DEVELOPMENT=true
export ROVER_MODEL__BASE_URL="${ROVER_MODEL__BASE_URL:-http://127.0.0.1:8090/v1}"

if [ "$cluster" = true ]; then
  scripts/rabbitmq-cluster.sh start
  eval "$(scripts/rabbitmq-cluster.sh env)"
  echo "rover: on the RabbitMQ cluster at $ROVER_AMQP__ADDRESSES (scripts/rabbitmq-cluster.sh status)" >&2
fi

"$bin/rover-toolserver" db setup --demo

logs="$dev/logs"
mkdir -p "$logs"
pids=()
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait
  echo "rover: stopped (logs in $logs/)" >&2
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
services=(rover-scripted-model rover-toolserver rover-worker rover-gateway)
if [ "$model" = local ]; then
  source scripts/llama-server.sh
  llama_start "$logs/llama-server.log" || exit 1
  pids+=("$LLAMA_PID")
  echo "rover: llama-server serves $LLAMA_MODEL_NAME at $LLAMA_URL (log: $logs/llama-server.log)" >&2
  export ROVER_MODEL__BASE_URL="$LLAMA_URL"
  export ROVER_MODEL__NAME="$LLAMA_MODEL_NAME"
  export ROVER_MODEL__PROVIDER=llama.cpp
  export ROVER_MODEL__WARM_PROMPT_CACHE=true
  services=(rover-toolserver rover-worker rover-gateway)
fi
for service in "${services[@]}"; do
  "$bin/$service" >"$logs/$service.log" 2>&1 &
  pids+=("$!")
done
echo "rover: the services log to $logs/ (tail -f $logs/rover-worker.log)" >&2
for _ in $(seq 1 100); do
  curl -fsS http://127.0.0.1:8080/readyz >/dev/null 2>&1 && break
  sleep 0.2
done
# The demo creates a department; a name the school does not have yet keeps a second run working.
taken=$(psql -h 127.0.0.1 -U postgres -d rover -tAc \
  "SELECT count(*) FROM departments d JOIN schools s ON s.id = d.school_id
   WHERE s.name = 'Kampala Hill School' AND d.name ~ '^Sciences( [0-9]+)?$'" 2>/dev/null || echo 0)
department="Sciences"
[ "${taken:-0}" -gt 0 ] && department="Sciences $((taken + 1))"
echo >&2
if [ "$model" = local ]; then
  echo "rover: the demo turn runs on $LLAMA_MODEL_NAME on this CPU: the first answer may take about 30 s" >&2
  echo "rover: while llama-server reads Rover's prompt (later turns reuse what it read)." >&2
fi
echo "rover: demo turn — the Hub would show:" >&2
"$bin/rover-gateway" demo --email admin@hill.school --message "Create a department called $department" \
  || echo "rover: the demo turn failed (see $logs/)" >&2
echo >&2
echo "rover: the Hub console: http://127.0.0.1:8080/ (sign in as a demo user)" >&2
echo "rover: serving on http://127.0.0.1:8080 (token: $bin/rover-gateway token --email admin@hill.school); Ctrl-C stops everything." >&2
wait -n || true
echo "rover: a service stopped on its own; see $logs/" >&2
exit 1
