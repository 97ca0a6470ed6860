#!/usr/bin/env bash
# README's serving figures (section Serve) on one checkpoint, in one run (ratios, not absolutes):
#  1. `ember bench-serve` at 1, 4 and 16 concurrent streams (greedy completions of
#     --prompt-tokens words, --output-tokens tokens): req/s, output tok/s, TTFT, TPOT, ITL, E2E;
#  2. one stream's decode against `ember generate` on the same prompt;
#  3. a chat's second turn over a ~512-token history: TTFT of turn 1 and turn 2 (each a
#     non-streamed request with max_tokens 1, so its latency is its time to first token) and
#     the prefix-cache hits /metrics reports.
#   bash bench/bench_serve.sh CHECKPOINT [BUILD_DIR] [PORT] [SERVE_OPTION...]   (defaults: build, 8431)
# Options after PORT go to `ember serve` (e.g. --kv-cache-dtype bfloat16); the generate of part 2
# gets the same --kv-cache-dtype.
# The checkpoint's tokenizer needs <|im_start|>/<|im_end|> for part 3 (`ember train` reserves them).
set -euo pipefail
cd "$(dirname "$0")/.."
ck=${1:?usage: bench/bench_serve.sh CHECKPOINT [BUILD_DIR] [PORT] [SERVE_OPTION...]}
build=${2:-build}
port=${3:-8431}
serve_options=("${@:4}")
kv_dtype=float32
for ((i = 0; i + 1 < ${#serve_options[@]}; ++i)); do
  [ "${serve_options[i]}" = --kv-cache-dtype ] && kv_dtype=${serve_options[i + 1]}
done
ember="$build/apps/ember"
url="http://127.0.0.1:$port"
[ -x "$ember" ] || { echo "build $ember first: cmake --build $build --target ember" >&2; exit 1; }
tmp=$(mktemp -d)
"$ember" serve --checkpoint "$ck" --port "$port" --served-name bench "${serve_options[@]}" > "$tmp/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 600); do grep -q 'listening on' "$tmp/serve.log" && break; sleep 0.2; done
grep -q 'listening on' "$tmp/serve.log" || { cat "$tmp/serve.log" >&2; exit 1; }

echo "== 1. bench-serve: 1, 4, 16 streams (4 x the streams requests of 128-word prompts, 128 output tokens, greedy)"
"$ember" bench-serve --url "$url" --concurrency 1,4,16 --prompt-tokens 128 \
  --output-tokens 128 --seed 1

echo "== 2. one stream against ember generate (same prompt, 128 tokens, greedy)"
prompt="The quick brown fox jumps over the lazy dog and then it runs away into the forest where"
"$ember" generate --checkpoint "$ck" --prompt "$prompt" --max-tokens 128 --top-k 1 --temperature 0 \
  --kv-cache-dtype "$kv_dtype" \
  2>&1 >/dev/null | tail -1
body=$(printf '{"prompt":"%s","max_tokens":128,"temperature":0}' "$prompt")
curl -s -o /dev/null -w 'serve, one request: %{time_total} s for the whole response\n' \
  -H 'Content-Type: application/json' -d "$body" "$url/v1/completions"
curl -s -H 'Content-Type: application/json' -d "$body" "$url/v1/completions" |
  python3 -c 'import json,sys; u=json.load(sys.stdin)["usage"]; print("serve usage:", u)'

echo "== 3. a chat's second turn over a ~512-token history"
python3 - "$url" <<'PY'
import json, sys, time, urllib.request
url = sys.argv[1]
words = ("the cat sat on a mat while the dog ran to the old red barn and a bird sang in the tall "
         "green tree near the river where children play every day after school").split()
history = [{"role": "system", "content": "You answer briefly."}]
for turn in range(8):
    history.append({"role": "user", "content": " ".join(words[(turn * 7 + i) % len(words)] for i in range(55))})
    history.append({"role": "assistant", "content": " ".join(words[(turn * 3 + i) % len(words)] for i in range(5))})
def post(messages):
    body = json.dumps({"messages": messages, "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req) as r:
        out = json.load(r)
    return time.perf_counter() - t, out["usage"]["prompt_tokens"]
def hits():
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    return int(float(next(l.split()[1] for l in text.splitlines() if l.startswith("ember_prefix_cache_hits_total"))))
first = history + [{"role": "user", "content": "And what next?"}]
h0 = hits(); t1, n1 = post(first); h1 = hits()
second = first + [{"role": "assistant", "content": "the cat sat"}, {"role": "user", "content": "Tell me more."}]
t2, n2 = post(second); h2 = hits()
print(f"turn 1: {n1} prompt tokens, TTFT {t1 * 1000:.0f} ms, prefix-cache hits +{h1 - h0} tokens")
print(f"turn 2: {n2} prompt tokens, TTFT {t2 * 1000:.0f} ms, prefix-cache hits +{h2 - h1} tokens"
      f" ({n2 - (h2 - h1)} prefilled); turn 1 / turn 2 = {t1 / t2:.1f}x")
PY
