# `ember bench` on a tiny MoE model (2 timed steps) and `ember train --profile`
# (3 steps): the printed lines are there, and the JSON fields (bench --json,
# OUT/profile.json) exist and hold positive numbers. Wrong options fail.
# Run as: cmake -DEMBER=... -DWORK=... -DDATA=... [-DISA_VARIANT=avx2|generic] -P bench_smoke.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/tiny.json [=[{"vocab_size": 256, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
  "ffn_hidden": 64, "qk_norm": true, "z_loss_coef": 1e-4, "max_seq_len": 32,
  "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 32, "n_shared": 1}}]=])

function(run_ember out_var)
  execute_process(COMMAND ${EMBER} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ember ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  message("${out}")
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

function(expect_lines text)
  foreach(pattern ${ARGN})
    if(NOT text MATCHES "${pattern}")
      message(FATAL_ERROR "output lacks a line matching \"${pattern}\"")
    endif()
  endforeach()
endfunction()

# Each path (a list of JSON keys / indices) must lead to a number > 0.
function(expect_positive json)
  foreach(path ${ARGN})
    string(REPLACE "." ";" keys "${path}")
    string(JSON value ERROR_VARIABLE error GET "${json}" ${keys})
    if(error OR NOT value GREATER 0)
      message(FATAL_ERROR "JSON ${path}: expected a positive number, got \"${value}\" ${error}")
    endif()
  endforeach()
endfunction()

# --- ember bench --------------------------------------------------------------------------
run_ember(out bench --config ${WORK}/tiny.json --steps 2 --warmup 1 --threads 2 --json ${WORK}/bench.json
          --profile)
expect_lines("${out}" "oneDNN ISA [a-z0-9_]+;" "matmul peak [0-9.]+ GFLOP/s" "float32 FMA peak [0-9.]+ GFLOP/s"
             "floor at the (float32 FMA|float32 matmul) peak" "floor ms\n"
             "\ntiny +8 +32 +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9.]+% +[0-9]+ MB +[0-9.]+\n"
             "phases: .*forward [0-9.]+%" "families: .*matmul [0-9.]+%" "moe_dispatch" "op family +ms/step"
             "products, A B(\\^T)?\\);" "causal: +[0-9.]+% of the peak")
# Under the caps of tests/isa (ISA_VARIANT avx2 or generic) the header names the capped instruction sets.
if(ISA_VARIANT STREQUAL "avx2")
  expect_lines("${out}" "oneDNN ISA (avx2|avx|sse41);" "float32 FMA peak [0-9.]+ GFLOP/s \\((avx2|generic) register-only")
elseif(ISA_VARIANT STREQUAL "generic")
  expect_lines("${out}" "oneDNN ISA sse41;" "float32 FMA peak [0-9.]+ GFLOP/s \\(generic register-only")
endif()
file(READ ${WORK}/bench.json bench)
expect_positive("${bench}" matmul_peak_gflops fma_peak_gflops floor_peak_gflops threads
                configs.0.floor_peak_gflops configs.0.floor_ms
                configs.0.ms_per_step_median configs.0.ms_per_step_best configs.0.tokens_per_s
                configs.0.gflops configs.0.mfu_percent configs.0.peak_rss_mb configs.0.flops_per_token
                configs.0.mfu_causal_percent configs.0.causal_flops_per_token
                configs.0.ms_per_step.1 configs.0.profile.steps
                configs.0.profile.phases.forward.ms_per_step configs.0.profile.phases.backward.ms_per_step
                configs.0.profile.phases.optimizer.ms_per_step
                configs.0.profile.families.matmul.ms_per_step configs.0.profile.families.matmul.calls_per_step
                configs.0.profile.families.moe_dispatch.calls_per_step)
string(JSON isa GET "${bench}" onednn_isa)
if(NOT isa MATCHES "^[a-z0-9_]+$")
  message(FATAL_ERROR "bench JSON onednn_isa: expected an ISA name, got \"${isa}\"")
endif()
string(JSON steps GET "${bench}" configs 0 profile steps)
if(NOT steps EQUAL 2)
  message(FATAL_ERROR "bench profile: ${steps} steps, expected the 2 timed ones")
endif()

# --- ember train --profile ---------------------------------------------------------------------
run_ember(out train --config ${WORK}/tiny.json --data ${DATA} --steps 3 --batch-size 2 --seq-len 16
          --out ${WORK}/run --profile)
expect_lines("${out}" "mean MFU [0-9.]+% of the (float32 matmul peak|fastest step's) [0-9.]+ GFLOP/s"
             "profile: 2 step\\(s\\) after 1 warm-up" "op family")
file(READ ${WORK}/run/profile.json profile)
expect_positive("${profile}" steps phases.forward.ms_per_step phases.backward.ms_per_step
                phases.clip.ms_per_step phases.optimizer.ms_per_step families.matmul.ms_per_step
                families.optimizer.calls_per_step families.data.calls_per_step)

# --- bad options fail ------------------------------------------------------------------------------
foreach(bad "--dtype;float16" "--preset;no-such-preset")
  execute_process(COMMAND ${EMBER} bench ${bad} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "ember bench ${bad} succeeded")
  endif()
endforeach()
