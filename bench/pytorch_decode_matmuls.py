#!/usr/bin/python3
"""PyTorch's float32 Linear at the rows of a serving step, weights from memory.

One decode step of gpt2-small reads every weight once: 12 blocks of q/k/v (as one
2304 x 768), o_proj 768 x 768, up 3072 x 768, down 768 x 3072, then the tied
lm_head 50257 x 768 (494 MB in all, far past any cache). This times that chain
of torch.nn.functional.linear calls at M = 1, 4, 16 and 64 rows (best of 5, two
threads) and prints ms and GFLOP/s, the peer figure for `bench_engine
--matmuls-only` (ember's matmul_rows at the same shapes).

OPENBLAS_CORETYPE is set from the CPU flags unless given (Debian's OpenBLAS
0.3.21 takes newer CPUs for Prescott), and the script refuses to time a torch
whose BLAS is not OpenBLAS (the reference BLAS is tens of times slower).
  /usr/bin/python3 bench/pytorch_decode_matmuls.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_side_by_side import blas_warning, torch_env  # noqa: E402

env, coretype_line = torch_env()
os.environ.update(env)  # before torch loads OpenBLAS, which reads it once
import torch  # noqa: E402

if warning := blas_warning():
    sys.exit(warning)
torch.set_num_threads(2)
shapes = [(2304, 768), (768, 768), (3072, 768), (768, 3072)] * 12 + [(50257, 768)]
weights = [torch.randn(n, k) for n, k in shapes]
print(f"{coretype_line}, 2 threads, "
      f"{sum(n * k for n, k in shapes) * 4 / 1e6:.0f} MB of float32 weights")
for m in (1, 4, 16, 64):
    xs = {k: torch.randn(m, k) for k in (768, 3072)}
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for w in weights:
            torch.nn.functional.linear(xs[w.shape[1]], w)
        best = min(best, time.perf_counter() - t)
    flops = sum(2 * m * n * k for n, k in shapes)
    print(f"M = {m:2d}: {best * 1e3:7.2f} ms  {flops / best / 1e9:6.1f} GFLOP/s")
