#!/usr/bin/env bash
# Record raw responses of a running llama-server (llama.cpp) as test
# fixtures. Meant to run under llama-server.sh, which starts the server and
# exports SUBAGENTS_OPENAI_BASE_URL, SUBAGENTS_OPENAI_MODEL and
# LLAMA_SERVER_LOG:
#
#   scripts/real-server/llama-server.sh \
#       scripts/real-server/record-llama-server-fixtures.sh [OUT_DIR]
#
# OUT_DIR defaults to actors/tests/fixtures/sse; PREFIX (environment)
# defaults to llama-server. For each fixture NAME it writes
# NAME.request.json (the body sent) and the response: NAME.sse is the exact
# streamed body (no decoding beyond HTTP chunking), NAME.txt is `curl -i`
# output (status line, headers and body), NAME.log the server's log lines
# about it.
#
# The model has random weights. Where a fixture needs the model to do
# something (stop by itself, finish a tool call, break the tool-call format)
# the script tries seeds, streaming each request, until the recorded stream
# shows it; the seed is in NAME.request.json. The same seed can give another
# answer on another run: the server reuses its prompt cache, and a prompt
# evaluated in another batch shape gives slightly different logits.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE/../../actors/tests/fixtures/sse}"
PREFIX="${PREFIX:-llama-server}"
: "${SUBAGENTS_OPENAI_BASE_URL:?run this under llama-server.sh}"
MODEL="${SUBAGENTS_OPENAI_MODEL:-tiny}"
URL="$SUBAGENTS_OPENAI_BASE_URL/chat/completions"
SERVER_LOG="${LLAMA_SERVER_LOG:-}"
mkdir -p "$OUT"

write_request() { # NAME JSON
    printf '%s\n' "$2" >"$OUT/$1.request.json"
}

stream() { # NAME JSON: raw SSE body into NAME.sse
    write_request "$1" "$2"
    curl -N -sS --max-time 120 -H 'Content-Type: application/json' \
        --data-binary @"$OUT/$1.request.json" "$URL" >"$OUT/$1.sse" || true
    printf 'recorded %s.sse (%s bytes)\n' "$1" "$(wc -c <"$OUT/$1.sse")" >&2
}

with_status() { # NAME JSON: status line, headers and body into NAME.txt
    write_request "$1" "$2"
    curl -N -sS -i --max-time 120 -H 'Content-Type: application/json' \
        --data-binary @"$OUT/$1.request.json" "$URL" >"$OUT/$1.txt" || true
    printf 'recorded %s.txt: %s\n' "$1" "$(head -n 1 "$OUT/$1.txt" | tr -d '\r')" >&2
}

# Streams JSON (in which @SEED@ stands for the seed) with seeds 1, 2, ...
# until the stream satisfies CONDITION, a Python expression over `sse` (the
# body, str) and `events` (the parsed `data:` JSON objects); records that
# one as NAME.sse and NAME.request.json. If no seed does, says so, records
# the rest and exits non-zero at the end (an older server may not do it).
FAILED=0
search() { # NAME CONDITION JSON
    python3 - "$URL" "$OUT/$1" "$2" "$3" <<'EOF' || FAILED=1
import json, sys, urllib.request
url, out, condition, template = sys.argv[1:]
for seed in range(1, 400):
    body = template.replace("@SEED@", str(seed))
    req = urllib.request.Request(url, body.encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw = r.read()
    except urllib.error.HTTPError:
        continue
    sse = raw.decode("utf-8", "replace")
    events = []
    for line in sse.splitlines():
        if line.startswith("data: {"):
            events.append(json.loads(line[len("data: "):]))
    if eval("(" + condition + ")", {"sse": sse, "events": events}):
        open(out + ".request.json", "w").write(body + "\n")
        open(out + ".sse", "wb").write(raw)
        print("recorded %s.sse (seed %d, %d bytes)" % (out.rsplit("/", 1)[-1], seed, len(raw)),
              file=sys.stderr)
        sys.exit(0)
sys.exit("%s: no seed in 1..399 gave a stream where %s" % (out, condition))
EOF
}

log_mark() { # the server log's size now
    if [ -n "$SERVER_LOG" ] && [ -f "$SERVER_LOG" ]; then wc -c <"$SERVER_LOG"; else echo 0; fi
}

log_since() { # NAME MARK PATTERN: server log lines since MARK matching PATTERN into NAME.log
    if [ -n "$SERVER_LOG" ] && [ -f "$SERVER_LOG" ]; then
        sleep 0.5
        tail -c +"$(( $2 + 1 ))" "$SERVER_LOG" | grep -a -E "$3" >"$OUT/$1.log" || true
        printf 'recorded %s.log (%s lines)\n' "$1" "$(wc -l <"$OUT/$1.log")" >&2
    fi
}

SYSTEM='{"role": "system", "content": "You are a terse assistant."}'
USER='{"role": "user", "content": "Say hello."}'
WEATHER_USER='{"role": "user", "content": "What is the weather in Paris?"}'
# `enum` leaves the model no choice inside the call: {"city": "Paris"}.
TOOLS='[{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris"]}}, "required": ["city"], "additionalProperties": false}}}]'
# A free string: the model may write any bytes into it.
FREE_TOOLS='[{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}}]'
NAMED='{"type": "function", "function": {"name": "get_weather"}}'
TOOL_CALLS='[{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]'
TOOL_RESULT='{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}'
# Token 2 is </s>: the grammar allows it only after a whole call, so a call
# ends there instead of being followed by more calls until max_tokens.
END_AFTER_CALL='"logit_bias": {"2": 30}'

# 1. Text that ends by itself, with the usage chunk.
search "$PREFIX-text" \
    'any(c.get("finish_reason") == "stop" for e in events for c in e.get("choices", []))
     and any(c.get("delta", {}).get("content") for e in events for c in e.get("choices", []))' \
    "{\"model\": \"$MODEL\", \"messages\": [$SYSTEM, $USER], \"stream\": true, \"max_tokens\": 16, \"temperature\": 1.5, \"seed\": @SEED@, \"stream_options\": {\"include_usage\": true}}"

# 2. Text cut by max_tokens.
stream "$PREFIX-length" "{
  \"model\": \"$MODEL\",
  \"messages\": [$SYSTEM, $USER],
  \"stream\": true,
  \"max_tokens\": 4,
  \"temperature\": 0,
  \"stream_options\": {\"include_usage\": true}
}"

# 3. A whole tool call (`required`; `auto` streams the same way). The model
#    writes some text, then <tool_call>, then the grammar spells the call
#    mostly a character a token: about 70 tokens.
search "$PREFIX-tool-call" \
    'any(c.get("finish_reason") == "tool_calls" for e in events for c in e.get("choices", []))
     and len({t.get("id") for e in events for c in e.get("choices", [])
              for t in c.get("delta", {}).get("tool_calls") or [] if t.get("id")}) == 1' \
    "{\"model\": \"$MODEL\", \"messages\": [$WEATHER_USER], \"tools\": $TOOLS, \"tool_choice\": \"required\", \"stream\": true, \"max_tokens\": 96, \"temperature\": 1.0, \"seed\": @SEED@, $END_AFTER_CALL, \"stream_options\": {\"include_usage\": true}}"

# 4. A tool call cut by max_tokens: `length`, the call's arguments cut.
search "$PREFIX-tool-call-length" \
    'any(c.get("finish_reason") == "length" for e in events for c in e.get("choices", []))
     and any(c.get("delta", {}).get("tool_calls") for e in events for c in e.get("choices", []))' \
    "{\"model\": \"$MODEL\", \"messages\": [$WEATHER_USER], \"tools\": $TOOLS, \"tool_choice\": \"required\", \"stream\": true, \"max_tokens\": 32, \"temperature\": 1.0, \"seed\": @SEED@, $END_AFTER_CALL, \"stream_options\": {\"include_usage\": true}}"

# 5. Output that breaks the tool-call format (here: a byte that is not
#    UTF-8 inside the free string): the server's final parse fails after the
#    200 went out, and it sends `data: {"error": ...}` and no [DONE].
mark="$(log_mark)"
search "$PREFIX-error" \
    '"data: {\"error\"" in sse' \
    "{\"model\": \"$MODEL\", \"messages\": [$WEATHER_USER], \"tools\": $FREE_TOOLS, \"tool_choice\": \"required\", \"stream\": true, \"max_tokens\": 64, \"temperature\": 1.0, \"seed\": @SEED@, $END_AFTER_CALL, \"stream_options\": {\"include_usage\": true}}"
log_since "$PREFIX-error" "$mark" 'unparsed|does not match'

# 6. `none`: tools on offer, plain text back.
stream "$PREFIX-tool-choice-none" "{
  \"model\": \"$MODEL\",
  \"messages\": [$WEATHER_USER],
  \"tools\": $TOOLS,
  \"tool_choice\": \"none\",
  \"stream\": true,
  \"max_tokens\": 4,
  \"temperature\": 0,
  \"stream_options\": {\"include_usage\": true}
}"

# 7. A named function: the server expects a string, logs a warning and
#    uses its default (`auto`).
mark="$(log_mark)"
stream "$PREFIX-named-tool-choice" "{
  \"model\": \"$MODEL\",
  \"messages\": [$WEATHER_USER],
  \"tools\": $TOOLS,
  \"tool_choice\": $NAMED,
  \"stream\": true,
  \"max_tokens\": 8,
  \"temperature\": 0,
  \"stream_options\": {\"include_usage\": true}
}"
log_since "$PREFIX-named-tool-choice" "$mark" 'tool_choice'

# 8. A grammar the server cannot parse, streamed: older servers (llama.cpp
#    4227c9be) answer 200, then an `error:` line (not `data:`) and [DONE];
#    newer ones answer HTTP 400 before streaming.
with_status "$PREFIX-grammar-error" "{
  \"model\": \"$MODEL\",
  \"messages\": [$SYSTEM, $USER],
  \"stream\": true,
  \"max_tokens\": 4,
  \"grammar\": \"root ::= undefined_rule\"
}"

# 9. An assistant tool-call message with `content: null` in the history.
with_status "$PREFIX-content-null" "{
  \"model\": \"$MODEL\",
  \"messages\": [$WEATHER_USER, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": $TOOL_CALLS}, $TOOL_RESULT],
  \"tools\": $TOOLS,
  \"stream\": true,
  \"max_tokens\": 4,
  \"temperature\": 0,
  \"stream_options\": {\"include_usage\": true}
}"

exit "$FAILED"
