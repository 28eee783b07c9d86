#!/usr/bin/env bash
# Run a REAL OpenAI-compatible server (llama-cpp-python's) on loopback with a
# tiny random-weight model, then run an optional command against it.
#
#   scripts/real-server/llama-cpp-python.sh [COMMAND [ARGS...]]
#
# Steps: make (or reuse) a venv, pip install gguf, numpy and
# llama-cpp-python[server] (built from the sdist with CMake: several minutes
# the first time), write a tiny GGUF model with make_tiny_gguf.py, start
# `python -m llama_cpp.server` on 127.0.0.1:$PORT, wait until GET /v1/models
# answers, run COMMAND with
#   SUBAGENTS_OPENAI_BASE_URL=http://127.0.0.1:$PORT/v1
#   SUBAGENTS_OPENAI_MODEL=tiny
# exported, and stop the server (by its pid) on exit. Without COMMAND it only
# checks that the server answers, unless KEEP_RUNNING=1, when it waits until
# interrupted.
#
# Environment (all optional):
#   PORT                      default 8765
#   LLAMA_DIR                 work folder, default /tmp/llama
#   VENV                      default $LLAMA_DIR/venv
#   LLAMA_CPP_PYTHON_VERSION  default 0.3.16
#   CMAKE_BUILD_PARALLEL_LEVEL default 2
#   STARTUP_TIMEOUT           seconds to wait for the server, default 120
#   KEEP_RUNNING              1: with no COMMAND, serve until interrupted
#
# Idempotent: the venv, the installed packages and the model are reused.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PORT="${PORT:-8765}"
LLAMA_DIR="${LLAMA_DIR:-/tmp/llama}"
VENV="${VENV:-$LLAMA_DIR/venv}"
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.16}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-120}"
KEEP_RUNNING="${KEEP_RUNNING:-0}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"

MODEL="$LLAMA_DIR/tiny.gguf"
PID_FILE="$LLAMA_DIR/server.pid"
SERVER_LOG="$LLAMA_DIR/server.log"
BASE="http://127.0.0.1:$PORT"
PY="$VENV/bin/python"

log() { printf '[llama-cpp-python.sh] %s\n' "$*" >&2; }

mkdir -p "$LLAMA_DIR"

# 1. venv and packages.
if [ ! -x "$PY" ]; then
    log "creating venv $VENV"
    python3 -m venv "$VENV"
fi

have_packages() {
    "$PY" - "$LLAMA_CPP_PYTHON_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
import gguf, numpy, llama_cpp, llama_cpp.server.app  # noqa: F401
sys.exit(0 if version("llama_cpp_python") == sys.argv[1] else 1)
EOF
}

if ! have_packages; then
    log "installing gguf, numpy and llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION (builds llama.cpp; takes minutes)"
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet gguf numpy
    start=$(date +%s)
    "$PY" -m pip install "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION"
    log "llama-cpp-python installed in $(( $(date +%s) - start ))s"
    have_packages || { log "llama-cpp-python did not install"; exit 1; }
fi

# 2. the tiny model (rebuilt when the generator changes).
if [ ! -s "$MODEL" ] || [ "$HERE/make_tiny_gguf.py" -nt "$MODEL" ]; then
    log "writing $MODEL"
    "$PY" "$HERE/make_tiny_gguf.py" "$MODEL.tmp"
    mv "$MODEL.tmp" "$MODEL"
fi

# 3. the server.
if curl -sS -o /dev/null --max-time 2 "$BASE/v1/models" 2>/dev/null; then
    log "something already answers on $BASE; set PORT to a free port"
    exit 1
fi

SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        log "stopping server pid $SERVER_PID"
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -f "$PID_FILE"
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "starting server on $BASE (log: $SERVER_LOG)"
"$PY" -m llama_cpp.server \
    --model "$MODEL" \
    --model_alias tiny \
    --host 127.0.0.1 \
    --port "$PORT" \
    --n_ctx 512 \
    >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
echo "$SERVER_PID" >"$PID_FILE"

deadline=$(( $(date +%s) + STARTUP_TIMEOUT ))
until curl -fsS -o /dev/null --max-time 2 "$BASE/v1/models" 2>/dev/null; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        log "server exited during startup; last lines of its log:"
        tail -n 30 "$SERVER_LOG" >&2 || true
        exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        log "server did not answer within ${STARTUP_TIMEOUT}s"
        tail -n 30 "$SERVER_LOG" >&2 || true
        exit 1
    fi
    sleep 0.5
done
log "server is up (pid $SERVER_PID)"

# 4. the command.
export SUBAGENTS_OPENAI_BASE_URL="$BASE/v1"
export SUBAGENTS_OPENAI_MODEL=tiny

if [ "$#" -gt 0 ]; then
    set +e
    "$@"
    rc=$?
    set -e
    exit "$rc"
fi

curl -fsS "$BASE/v1/models"
echo
if [ "$KEEP_RUNNING" = 1 ]; then
    log "serving on $SUBAGENTS_OPENAI_BASE_URL until interrupted"
    wait "$SERVER_PID"
fi
