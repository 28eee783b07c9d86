#!/usr/bin/env bash
# Instruction counts per op of the benchmark cases, under callgrind.
#
#   benches/callgrind.sh                 # every case: a Markdown table
#   benches/callgrind.sh gate-ours       # one case (names: bench_report's
#   benches/callgrind.sh gate-ours 1000 3000   #  CASES), at two op counts
#   KEEP=1 benches/callgrind.sh spawn-hub   # keep the profiles for
#                                           # callgrind_annotate
#
# Each case runs alone (`bench_report --case NAME --ops N`) on a
# current-thread tokio runtime, at two op counts; instructions per op is
# the difference of the totals over the difference of the ops, so set-up
# and teardown cancel out. Counts are deterministic to within a few
# instructions per op, unlike times on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
cargo build --quiet --release --example bench_report
exe="${CARGO_TARGET_DIR:-target}/release/examples/bench_report"

if [ $# -eq 0 ]; then
    exec "$exe" --callgrind-only
fi

case_name=$1
lo=${2:-1000}
hi=${3:-3000}
count() {
    local out=/dev/null
    if [ "${KEEP:-0}" = 1 ]; then out="callgrind.out.$case_name.$1"; fi
    valgrind --tool=callgrind --callgrind-out-file="$out" "$exe" \
        --case "$case_name" --ops "$1" 2>&1 | sed -n 's/.*Collected : *//p'
}
a=$(count "$lo")
b=$(count "$hi")
echo "$case_name: $(((b - a) / (hi - lo))) instructions/op ($lo → $hi ops: $a → $b)"
if [ "${KEEP:-0}" = 1 ]; then
    echo "profiles: callgrind.out.$case_name.$lo, callgrind.out.$case_name.$hi (callgrind_annotate FILE)"
fi
