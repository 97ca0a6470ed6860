#!/usr/bin/env bash
# A soak of `ember serve`: 16 concurrent streaming clients for DURATION seconds, a
# fifth of them dropping their connection mid-stream, sampling at temperature 0.8;
# prints the bench-serve row (ok / failed / dropped), the server's resident memory
# every 30 s (flat after warm-up means nothing leaks per request) and /metrics'
# request counters at the end.
#   bash bench/bench_serve_soak.sh CHECKPOINT [DURATION] [BUILD_DIR] [PORT] [SERVE_OPTION...]
#   (defaults: 600, build, 8432; options after PORT go to `ember serve`, e.g. --kv-cache-dtype bfloat16)
set -euo pipefail
cd "$(dirname "$0")/.."
ck=${1:?usage: bench/bench_serve_soak.sh CHECKPOINT [DURATION] [BUILD_DIR] [PORT] [SERVE_OPTION...]}
duration=${2:-600}
build=${3:-build}
port=${4:-8432}
serve_options=("${@:5}")
ember="$build/apps/ember"
url="http://127.0.0.1:$port"
[ -x "$ember" ] || { echo "build $ember first: cmake --build $build --target ember" >&2; exit 1; }
tmp=$(mktemp -d)
"$ember" serve --checkpoint "$ck" --port "$port" "${serve_options[@]}" > "$tmp/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 600); do grep -q 'listening on' "$tmp/serve.log" && break; sleep 0.2; done
grep -q 'listening on' "$tmp/serve.log" || { cat "$tmp/serve.log" >&2; exit 1; }
rss() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$server/status"; }
echo "RSS after loading: $(rss) MiB"
( start=$(date +%s)
  while kill -0 $server 2>/dev/null; do
    sleep 30; echo "t=$(( $(date +%s) - start )) s: RSS $(rss) MiB"
  done ) &
sampler=$!
"$ember" bench-serve --url "$url" --concurrency 16 --duration "$duration" --disconnect-fraction 0.2 \
  --temperature 0.8 --prompt-tokens 64 --output-tokens 96 --seed 3
kill $sampler 2>/dev/null || true
echo "RSS at the end: $(rss) MiB"
curl -s "$url/metrics" | grep -E '^ember_(requests_total|requests_finished_total|requests_running|kv_blocks_used|preemptions_total)'
