#!/usr/bin/env bash
# Installs what is missing, configures, builds and runs every test through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# python3-torch, -h5py, -numpy: the float64 references that the CTests reference_check (training)
# and reference_finetune (fine-tuning) compare ember against; without them those are not registered.
# slurm-wlm, munge: the one-machine Slurm cluster of the CTest slurm_train (tests/slurm/run.sh); their
# install starts no Slurm daemon (no slurm.conf) and, without systemd, munged from its init script.
EMBER_EXTRA_PACKAGES="${EMBER_EXTRA_PACKAGES:-} python3-torch python3-h5py python3-numpy slurm-wlm munge" \
  bash scripts/install_deps.sh
jobs=$(nproc)
# A new build tree is configured for Ninja: on 2 cores it builds ember and the tests in less
# time than make (no per-target make steps; a target's files compile while its libraries link).
# CMake keeps an existing tree's generator; CMAKE_GENERATOR set by the caller wins.
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
# Open MPI refuses root without these; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j "$jobs"
