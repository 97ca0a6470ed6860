#!/usr/bin/env bash
# Installs ember's Debian build and run dependencies, only those missing.
set -euo pipefail
packages=(build-essential cmake libdnnl-dev libopenmpi-dev openmpi-bin libhdf5-dev
          hdf5-tools libcli11-dev catch2 nlohmann-json3-dev libcpp-httplib-dev pkg-config unicode-data
          python3 strace)  # strace: test_cli_faults checks the fsync order of the atomic writers; python3: tests/hf's pure-Python Hugging Face reference (standard library only)
packages+=(ninja-build)  # scripts/test.sh and run.sh configure a new build tree for Ninja (faster than make)
packages+=(iproute2)  # ip netns / veth: tests/net's multi-node test across network namespaces
packages+=(${EMBER_EXTRA_PACKAGES:-})  # e.g. fortunes for the main job
# node + npm for tests/serve (the official OpenAI JS client); only when `npm` is missing: a NodeSource
# nodejs bundles npm and must not be mixed with Debian's, and an installed nodejs is skipped below.
command -v npm > /dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "ember: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
