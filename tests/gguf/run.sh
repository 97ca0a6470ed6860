#!/usr/bin/env bash
# Runs one GGUF test file (node:test, ESM) with the packages setup.sh installed in WORK/node.
# Without node or those packages it prints why and exits 77 (CTest's skip), except under CI (CI set,
# not "false"/"0"), where that is a failure.
# Usage: run.sh EMBER WORK TEST_FILE
set -uo pipefail
ember=$1 work=$2 test_file=$3
why=""
if ! command -v node > /dev/null; then
  why="node is not installed"
elif [ ! -f "$work/node/node_modules/node-llama-cpp/package.json" ] ||
     [ ! -f "$work/node/node_modules/@huggingface/gguf/package.json" ]; then
  why="the npm packages node-llama-cpp and @huggingface/gguf are not in $work/node (setup.sh could not install them)"
elif [ ! -f "$work/qwen3.float32.gguf" ]; then
  why="no exported model in $work (the gguf_setup test did not run)"
fi
if [ -n "$why" ]; then
  if [ -n "${CI:-}" ] && [ "$CI" != "false" ] && [ "$CI" != "0" ]; then
    echo "FAILED: $why (CI is set, so this is not skipped)"
    exit 1
  fi
  echo "SKIPPED: $why"
  exit 77
fi
export EMBER_BINARY=$ember EMBER_GGUF_WORK=$work NODE_PATH=$work/node/node_modules
exec node --test-reporter=spec "$test_file"
