#!/usr/bin/env bash
# A three-node RabbitMQ cluster on this machine, from the installed rabbitmq-server, beside (never
# instead of) the default node on 5672: `make cluster` and the chaos suite's node kills use it.
#
#   scripts/rabbitmq-cluster.sh start          start the three nodes, join them, wait until healthy
#   scripts/rabbitmq-cluster.sh stop           stop the three nodes (their data stays)
#   scripts/rabbitmq-cluster.sh status         each node: running or not, and the cluster's members
#   scripts/rabbitmq-cluster.sh env            the services' settings for it (ROVER_AMQP__URL,
#                                              ROVER_AMQP__ADDRESSES, ROVER_AMQP__TOOLS_QUEUE), as
#                                              `export` lines
#   scripts/rabbitmq-cluster.sh start-node N   start node N (1-3) again, e.g. after a kill -9; it
#                                              rejoins the cluster from its own data
#   scripts/rabbitmq-cluster.sh running N      exits 0 when node N runs (its process, its port)
#   scripts/rabbitmq-cluster.sh pid N          the operating-system pid of node N
#   scripts/rabbitmq-cluster.sh ctl N ARGS…    rabbitmqctl ARGS… against node N
#   scripts/rabbitmq-cluster.sh queues N ARGS… rabbitmq-queues ARGS… against node N
#   scripts/rabbitmq-cluster.sh reset          stop, and delete the cluster's data
# Every command is idempotent: `start` with the cluster up changes nothing.
#
# Each node has its own node name (rover-c<N>@localhost), AMQP port (ROVER_CLUSTER_PORT + N - 1,
# 5681-5683 by default), distribution port (the AMQP port + 20000), and its own config file,
# data, logs and enabled-plugins file under ROVER_CLUSTER_DIR (target/rabbitmq-cluster by
# default). Why each of those, on Debian's RabbitMQ 3.10:
#   - /etc/rabbitmq/rabbitmq.conf pins the listener to 5672, so each node gets a
#     RABBITMQ_CONFIG_FILE of its own naming its port (and /etc/rabbitmq/rabbitmq-env.conf names
#     the default node, so each node gets its own RABBITMQ_CONF_ENV_FILE too);
#   - /usr/sbin/rabbitmq-server switches to the rabbitmq user and drops the environment, so the
#     nodes are started with /usr/lib/rabbitmq/bin/rabbitmq-server -detached;
#   - the nodes and rabbitmqctl find each other with an Erlang cookie of the cluster's own in
#     ROVER_CLUSTER_DIR/home (HOME for every command here), so nothing here can reach the default
#     node, which has another cookie.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${ROVER_CLUSTER_DIR:-$PWD/target/rabbitmq-cluster}
base_port=${ROVER_CLUSTER_PORT:-5681}
nodes=(1 2 3)
bin=/usr/lib/rabbitmq/bin
# RabbitMQ must not hand a worker's turn to another while the worker holds it (agent.turn_timeout_ms
# is 10 min): the server-wide consumer_timeout, as deploy/local/ensure-services.sh sets it.
consumer_timeout_ms=${ROVER_CONSUMER_TIMEOUT_MS:-2400000}

say() { printf 'rover-cluster: %s\n' "$*" >&2; }

node_name() { echo "rover-c$1@localhost"; }
amqp_port() { echo $((base_port + $1 - 1)); }
node_dir() { echo "$dir/node$1"; }

# The environment every command about node N runs in.
node_env() {
  local n=$1 d
  d=$(node_dir "$n")
  echo HOME="$dir/home" \
    RABBITMQ_NODENAME="$(node_name "$n")" \
    RABBITMQ_NODE_PORT="$(amqp_port "$n")" \
    RABBITMQ_DIST_PORT="$(($(amqp_port "$n") + 20000))" \
    RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" \
    RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
    RABBITMQ_MNESIA_BASE="$d/mnesia" \
    RABBITMQ_MNESIA_DIR="$d/mnesia/$(node_name "$n")" \
    RABBITMQ_LOG_BASE="$d/log" \
    RABBITMQ_PID_FILE="$d/pid"
}

ctl() {
  local n=$1
  shift
  env $(node_env "$n") "$bin/rabbitmqctl" -n "$(node_name "$n")" "$@"
}

queues() {
  local n=$1
  shift
  env $(node_env "$n") "$bin/rabbitmq-queues" -n "$(node_name "$n")" "$@"
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A node is running when its own process (the pid file's) is alive and its AMQP port answers:
# cheaper than asking rabbitmqctl, which takes seconds on a busy machine.
running() {
  local pid
  pid=$(cat "$(node_dir "$1")/pid" 2>/dev/null) || return 1
  kill -0 "$pid" 2>/dev/null && port_taken "$(amqp_port "$1")"
}

prepare() {
  mkdir -p "$dir/home"
  chmod 700 "$dir/home"
  if [ ! -f "$dir/home/.erlang.cookie" ]; then
    # Its own cookie: the default node (another cookie) can never be reached from here.
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F >"$dir/home/.erlang.cookie"
    chmod 400 "$dir/home/.erlang.cookie"
  fi
  local n d
  for n in "${nodes[@]}"; do
    d=$(node_dir "$n")
    mkdir -p "$d/mnesia" "$d/log"
    cat >"$d/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$(amqp_port "$n")
loopback_users = none
consumer_timeout = $consumer_timeout_ms
EOF
    # Loopback only, as the default node (/etc/rabbitmq/rabbitmq-env.conf), but its own node name.
    cat >"$d/rabbitmq-env.conf" <<EOF
ERL_EPMD_ADDRESS=127.0.0.1
export ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}"
EOF
    echo '[].' >"$d/advanced.config"
    echo '[].' >"$d/enabled_plugins"
  done
}

start_node() {
  local n=$1
  if running "$n"; then
    return 0
  fi
  if port_taken "$(amqp_port "$n")"; then
    say "port $(amqp_port "$n") is taken by something else; set ROVER_CLUSTER_PORT to a free range"
    return 1
  fi
  say "starting $(node_name "$n") on 127.0.0.1:$(amqp_port "$n")"
  env $(node_env "$n") "$bin/rabbitmq-server" -detached >/dev/null 2>&1
}

await_node() {
  local n=$1
  for _ in $(seq 1 120); do
    if running "$n" && ctl "$n" -q await_startup --timeout 60 >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  say "$(node_name "$n") did not start; see $(node_dir "$n")/log/"
  return 1
}

# The names of the cluster's disk members as node 1 sees them.
members() {
  ctl 1 -q cluster_status --formatter json 2>/dev/null |
    grep -o '"disk_nodes":\[[^]]*\]' | grep -o 'rover-c[0-9]@localhost' || true
}

join() {
  local n=$1
  if members | grep -qx "$(node_name "$n")"; then
    return 0
  fi
  say "joining $(node_name "$n") to $(node_name 1)"
  # (join_cluster logs a node's feature-flag bookkeeping to the terminal: kept in the node's log.)
  {
    ctl "$n" -q stop_app
    ctl "$n" -q reset
    ctl "$n" -q join_cluster "$(node_name 1)"
    ctl "$n" -q start_app
  } >>"$(node_dir "$n")/log/join.log" 2>&1 || {
    say "$(node_name "$n") could not join; see $(node_dir "$n")/log/join.log"
    return 1
  }
}

healthy() {
  local n
  for n in "${nodes[@]}"; do
    ctl "$n" -q await_startup --timeout 60 >/dev/null 2>&1 || return 1
  done
  [ "$(ctl 1 -q cluster_status --formatter json | grep -o '"running_nodes":\[[^]]*\]' | grep -o 'rover-c[0-9]@localhost' | sort -u | wc -l)" -eq "${#nodes[@]}" ]
}

start() {
  local n started
  started=$(date +%s)
  if running 1 && running 2 && running 3 && [ "$(members | wc -l)" -eq "${#nodes[@]}" ]; then
    return 0
  fi
  prepare
  for n in "${nodes[@]}"; do start_node "$n"; done
  for n in "${nodes[@]}"; do await_node "$n"; done
  for n in "${nodes[@]:1}"; do join "$n"; done
  for _ in $(seq 1 60); do
    if healthy; then
      say "three nodes up and joined in $(($(date +%s) - started)) s: $(members | tr '\n' ' ')"
      return 0
    fi
    sleep 0.5
  done
  say "the cluster did not become healthy"
  ctl 1 cluster_status >&2 || true
  return 1
}

stop() {
  local n
  for n in "${nodes[@]}"; do
    if running "$n"; then
      say "stopping $(node_name "$n")"
      ctl "$n" -q stop >/dev/null 2>&1 || true
    fi
  done
}

status() {
  local n
  for n in "${nodes[@]}"; do
    if running "$n"; then
      echo "$(node_name "$n") 127.0.0.1:$(amqp_port "$n") running (pid $(cat "$(node_dir "$n")/pid" 2>/dev/null || echo '?'))"
    else
      echo "$(node_name "$n") 127.0.0.1:$(amqp_port "$n") stopped"
    fi
  done
  echo "members: $(members | tr '\n' ' ')"
}

print_env() {
  local addresses="" n
  for n in "${nodes[@]}"; do
    addresses+="${addresses:+,}127.0.0.1:$(amqp_port "$n")"
  done
  echo "export ROVER_AMQP__URL=amqp://guest:guest@127.0.0.1:$(amqp_port 1)/%2f"
  echo "export ROVER_AMQP__ADDRESSES=$addresses"
  # Tool calls outlive a node only in a queue replicated on every node.
  echo "export ROVER_AMQP__TOOLS_QUEUE=quorum"
}

node_arg() {
  case "${1:-}" in
    1 | 2 | 3) echo "$1" ;;
    *) say "which node? 1, 2 or 3"; exit 2 ;;
  esac
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) print_env ;;
  start-node)
    n=$(node_arg "${2:-}")
    prepare
    start_node "$n"
    await_node "$n"
    ;;
  running)
    n=$(node_arg "${2:-}")
    running "$n"
    ;;
  pid)
    n=$(node_arg "${2:-}")
    cat "$(node_dir "$n")/pid"
    ;;
  ctl)
    n=$(node_arg "${2:-}")
    shift 2
    ctl "$n" "$@"
    ;;
  queues)
    n=$(node_arg "${2:-}")
    shift 2
    queues "$n" "$@"
    ;;
  reset)
    stop
    rm -rf "$dir"
    ;;
  *)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
