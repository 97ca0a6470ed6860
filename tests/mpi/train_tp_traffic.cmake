# `mpirun -np 2 ember train --tp 2 --profile` (docs/scaling.md#tensor-parallel-traffic): the
# calls and payload bytes the tensor group's all-reduces move per step, as profile.json's
# "traffic" counts them by phase, equal the formula computed here from the run's B, T, grad-accum
# and the config (d_model, n_layers, heads, head_dim, MoE), not from ember's code: forward
# A (2L + 3) calls, A ((2L + 1) N d 4 + 24 N) bytes (N = B T; the embedding's and the blocks' o
# and down sums in float32, the loss's max [N] and sums [2, N] in float64); backward
# A (2L + 1 + 2L qk + L_moe) calls, A ((2L + 1) N d 4 + 2L qk hd 4 + L_moe N k 4) bytes (the
# blocks' and the head's input gradients, QK-norm weights, MoE routing weights); clip 1 call of
# 8 bytes; each checkpoint 3 calls per split parameter (it and its two AdamW moments) of its
# padded whole; with R blocks recomputed (--checkpoint-activations) their two forward sums again
# in the backward, A 2R calls of N d 4 bytes. A GQA QK-norm z-loss model at --grad-accum 2 with a
# padded vocabulary, the same at (T, P, D) = (2, 1, 2) (the data-parallel traffic is not the
# tensor group's) and with --checkpoint-every 2 (R = 1 of 2 blocks), and an MoE model (shared
# expert). Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)
run("data" ${TOOL} data ${WORK})

# check_phase(DIR PHASE CALLS BYTES): over the run's profiled steps (profile.json "steps"), phase
# PHASE's tp_all_reduce counts are CALLS and BYTES per step.
function(check_phase dir phase calls bytes)
  file(READ ${dir}/profile.json profile)
  string(JSON steps GET "${profile}" steps)
  string(JSON got_calls ERROR_VARIABLE missing GET "${profile}" traffic tp_all_reduce by_phase ${phase} calls)
  string(JSON got_bytes ERROR_VARIABLE missing GET "${profile}" traffic tp_all_reduce by_phase ${phase} bytes)
  if(missing)
    message(FATAL_ERROR "${dir}: profile.json has no tp_all_reduce traffic in ${phase}: ${missing}")
  endif()
  math(EXPR want_calls "${calls} * ${steps}")
  math(EXPR want_bytes "${bytes} * ${steps}")
  message("${dir} ${phase}: ${got_calls} calls, ${got_bytes} bytes over ${steps} steps; "
          "the formula: ${want_calls}, ${want_bytes}")
  if(NOT got_calls EQUAL want_calls OR NOT got_bytes EQUAL want_bytes)
    message(FATAL_ERROR "${dir} ${phase}: counted ${got_calls} calls and ${got_bytes} bytes, "
                        "the formula gives ${want_calls} and ${want_bytes}")
  endif()
endfunction()

# check_run(DIR B T A D L HEADS KV HD FFN VPAD QK MOE_L K E EH SHARED R): every phase of the run
# against the formula; the one checkpoint in the profiled steps (the last step's) counted apart.
function(check_run dir B T A d L heads kv hd ffn vpad qk moe_layers k experts eh shared recomputed)
  math(EXPR N "${B} * ${T}")
  math(EXPR fwd_calls "${A} * (2 * ${L} + 3)")
  math(EXPR fwd_bytes "${A} * ((2 * ${L} + 1) * ${N} * ${d} * 4 + 24 * ${N})")
  math(EXPR bwd_calls "${A} * (2 * ${L} + 1 + 2 * ${L} * ${qk} + ${moe_layers} + 2 * ${recomputed})")
  math(EXPR bwd_bytes "${A} * ((2 * ${L} + 1) * ${N} * ${d} * 4 + 2 * ${L} * ${qk} * ${hd} * 4 \
                       + ${moe_layers} * ${N} * ${k} * 4 + 2 * ${recomputed} * ${N} * ${d} * 4)")
  check_phase(${dir} forward ${fwd_calls} ${fwd_bytes})
  check_phase(${dir} backward ${bwd_calls} ${bwd_bytes})
  check_phase(${dir} clip 1 8)
  # Split parameters: the token table (vocabulary rows, padded), q k v o, and the dense MLP's or
  # every expert's and shared expert's gate, up, down; each gathered with its two moments.
  math(EXPR attn "${heads} * ${hd} * ${d} * 2 + ${kv} * ${hd} * ${d} * 2")
  if(moe_layers EQUAL 0)
    math(EXPR tensors "1 + ${L} * 7")
    math(EXPR elements "${vpad} * ${d} + ${L} * (${attn} + 3 * ${ffn} * ${d})")
  else()
    math(EXPR tensors "1 + ${L} * (4 + 3 * ${experts} + 3 * ${shared})")
    math(EXPR elements "${vpad} * ${d} + ${L} * (${attn} + 3 * (${experts} + ${shared}) * ${eh} * ${d})")
  endif()
  file(READ ${dir}/profile.json profile)
  string(JSON steps GET "${profile}" steps)
  math(EXPR save_calls "3 * ${tensors}")
  math(EXPR save_bytes "3 * ${elements} * 4")
  string(JSON got_calls GET "${profile}" traffic tp_all_reduce by_phase checkpoint calls)
  string(JSON got_bytes GET "${profile}" traffic tp_all_reduce by_phase checkpoint bytes)
  message("${dir} checkpoint: ${got_calls} calls, ${got_bytes} bytes; the formula: ${save_calls}, ${save_bytes}")
  if(NOT got_calls EQUAL save_calls OR NOT got_bytes EQUAL save_bytes)
    message(FATAL_ERROR "${dir} checkpoint: counted ${got_calls} calls and ${got_bytes} bytes, "
                        "the formula gives ${save_calls} and ${save_bytes}")
  endif()
  string(JSON phases LENGTH "${profile}" traffic tp_all_reduce by_phase)
  if(NOT phases EQUAL 4)
    message(FATAL_ERROR "${dir}: tp_all_reduce traffic in ${phases} phases, not forward, backward, clip, checkpoint")
  endif()
endfunction()

# head_dim 16 / 4 = 4; the vocabulary 65 padded to 66.
file(WRITE ${WORK}/gqa.json [=[
{"vocab_size": 65, "d_model": 16, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 32,
 "max_seq_len": 16, "qk_norm": true, "z_loss_coef": 0.01, "dropout": 0}
]=])
set(common train --data ${WORK}/train.bin --sequential --seq-len 16 --steps 4 --batch-size 4
    --log-every 1 --eval-every 2 --profile)
run("T=2 A=2" ${mpirun} -np 2 ${EMBER} ${common} --config ${WORK}/gqa.json --grad-accum 2 --tp 2
    --out ${WORK}/gqa)
check_run(${WORK}/gqa 4 16 2 16 2 4 2 4 32 66 1 0 0 0 0 0 0)
run("T=2 D=2 A=2" ${mpirun} -np 4 ${EMBER} ${common} --config ${WORK}/gqa.json --grad-accum 2 --tp 2
    --out ${WORK}/gqa_d2)
check_run(${WORK}/gqa_d2 4 16 2 16 2 4 2 4 32 66 1 0 0 0 0 0 0)
run("T=2 A=2 recompute" ${mpirun} -np 2 ${EMBER} ${common} --config ${WORK}/gqa.json --grad-accum 2 --tp 2
    --checkpoint-every 2 --out ${WORK}/gqa_recompute)
check_run(${WORK}/gqa_recompute 4 16 2 16 2 4 2 4 32 66 1 0 0 0 0 0 1)

# Every block MoE: 4 experts of 8 units, top-2, one shared expert; head_dim 16 / 2 = 8.
file(WRITE ${WORK}/moe.json [=[
{"vocab_size": 64, "d_model": 16, "n_layers": 2, "n_heads": 2, "ffn_hidden": 32, "max_seq_len": 16,
 "dropout": 0, "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 8, "n_shared": 1,
 "aux_loss_coef": 0.01, "router_z_loss_coef": 0.001}}
]=])
run("MoE T=2" ${mpirun} -np 2 ${EMBER} ${common} --config ${WORK}/moe.json --tp 2 --out ${WORK}/moe)
check_run(${WORK}/moe 4 16 1 16 2 2 2 8 32 64 0 2 2 4 8 1 0)
file(REMOVE_RECURSE ${WORK})
