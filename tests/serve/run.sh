#!/usr/bin/env bash
# Runs one serve test file (node:test, ESM) with the OpenAI client that setup.sh installed in WORK/node.
# Without node or that package it prints why and exits 77 (CTest's skip), except under CI (CI set, not
# "false"/"0"), where that is a failure.
# Usage: run.sh EMBER WORK TEST_FILE
set -uo pipefail
ember=$1 work=$2 test_file=$3
why=""
if ! command -v node > /dev/null; then
  why="node is not installed"
elif [ ! -f "$work/node/node_modules/openai/package.json" ]; then
  why="the npm package openai is not in $work/node (setup.sh could not install it)"
elif [ ! -f "$work/run/latest" ]; then
  why="no checkpoint in $work/run (the serve_client_setup test did not run)"
fi
if [ -n "$why" ]; then
  if [ -n "${CI:-}" ] && [ "$CI" != "false" ] && [ "$CI" != "0" ]; then
    echo "FAILED: $why (CI is set, so this is not skipped)"
    exit 1
  fi
  echo "SKIPPED: $why"
  exit 77
fi
export EMBER_BINARY=$ember EMBER_SERVE_WORK=$work
exec node --test-reporter=spec "$test_file"
