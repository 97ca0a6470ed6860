# `mpirun ember train --pp 2` (docs/scaling.md#pipeline-parallelism-in-ember-train) against one
# process on the same global batch: a tied, GQA, QK-norm, z-loss model of 4 blocks clipped at a
# norm every step reaches, validated every 5 steps through the stages. The losses, gradient
# norms and validation losses of every step (train_parity_tool metrics; the norms within 1e-4
# relative) and the final weights (relative 1e-4 per tensor: the stages' gradient norm and the
# micro-batches' sums add in another order, and AdamW makes whole steps of the rounding of
# gradients near 0) match at (T, P, D) = (1, 2, 1) with 1f1b and gpipe, M = 2 and 4, uneven
# stages (--pp-layers 1,3), at (2, 2, 1) and (1, 2, 2) (also with --zero 1: moments and step
# counts compared), with --checkpoint-activations, with
# --dtype bf16 (3 steps), and for an MoE config. The checkpoint is
# whole: saved at (2, 2, 1) it resumes at (1, 1, 1) and at (1, 2, 2) to the unbroken run, and at
# (1, 2, 1) bit for bit to the unbroken (1, 2, 1) run. Combinations not available are refused
# in one line. Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/layout_runs.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} data ${WORK})
file(WRITE ${WORK}/tied.json [=[
{"vocab_size": 65, "d_model": 16, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 32,
 "max_seq_len": 16, "qk_norm": true, "z_loss_coef": 0.01, "dropout": 0, "tie_embeddings": true}
]=])
set(common train --config ${WORK}/tied.json --data ${WORK}/train.bin --val-data ${WORK}/train.bin
    --eval-batches 2 --sequential --seq-len 16 --steps 10 --warmup 2 --lr 1e-2 --clip 0.5
    --log-every 1 --eval-every 5 --save-every 5 --batch-size 4)
set(final step_00000010.h5)
set(reassociated 1e-4)
run("P=1" ${EMBER} ${common} --out ${WORK}/p1)

same_as_one(pp2 2 p1 --pp 2)
# Each step's record has both stages' times and the idle share; the progress line the bubble.
file(STRINGS ${WORK}/pp2/metrics.jsonl records)
list(GET records 0 first)
foreach(key pp_forward_ms pp_backward_ms pp_wait_ms)
  string(JSON n ERROR_VARIABLE missing LENGTH "${first}" ${key})
  if(NOT n EQUAL 2)
    message(FATAL_ERROR "metrics.jsonl of --pp 2: ${key} should hold 2 stages' times: ${first}")
  endif()
endforeach()
string(JSON idle GET "${first}" pp_idle)
if(idle LESS 0 OR idle GREATER 1)
  message(FATAL_ERROR "metrics.jsonl of --pp 2: pp_idle ${idle} is not a share")
endif()
same_as_one(pp2_m4 2 p1 --pp 2 --micro-batches 4)
same_as_one(pp2_gpipe 2 p1 --pp 2 --pp-schedule gpipe)
same_as_one(pp2_gpipe_m4 2 p1 --pp 2 --pp-schedule gpipe --micro-batches 4 --pp-layers 1,3)
same_as_one(tp2_pp2 4 p1 --tp 2 --pp 2)
same_as_one(pp2_recompute 2 p1 --pp 2 --checkpoint-activations)
bf16_same_as_one(${WORK}/tied.json --pp 2)
# (1, 2, 2): two pipelines of batch 4 each against one process at batch 8, and, with one
# micro-batch, against --pp 2 with --grad-accum 2 (the reducer's sum over the data ranks is the
# accumulation's: bit for bit; with M = 2 the four micro-batches would be summed as (a + b) +
# (c + d) instead of ((a + b) + c) + d).
run("P=1 B=8" ${EMBER} ${common} --batch-size 8 --out ${WORK}/p1b8)
same_as_one(pp2_dp2 4 p1b8 --pp 2 --check-every 2)
# --zero 1 at (1, 2, 2): the moments sharded over the data ranks of each stage; the tied table's
# gradient summed over the end stages before the reducer averages it (their shards cut it at other
# places), the gradient norm counted from the shards (the last stage's copy left out; clipped
# every step). The same as one process at batch 8 and as --zero 0, moments and step counts too.
same_as_one(pp2_dp2_zero1 4 p1b8 --pp 2 --zero 1 --check-every 2)
run("pp2_dp2_zero1 state = p1b8" ${TOOL} compare-state ${WORK}/pp2_dp2_zero1/${final} ${WORK}/p1b8/${final}
    ${reassociated})
run("pp2_dp2_zero1 = pp2_dp2" ${TOOL} compare-state ${WORK}/pp2_dp2_zero1/${final} ${WORK}/pp2_dp2/${final}
    ${reassociated})
run("P=2 M=1 D=2" ${mpirun} -np 4 ${EMBER} ${common} --pp 2 --micro-batches 1 --out ${WORK}/pp2m1d2)
run("P=2 M=1 A=2" ${mpirun} -np 2 ${EMBER} ${common} --pp 2 --micro-batches 1 --grad-accum 2 --out ${WORK}/pp2m1a2)
run("P=2 D=2 = P=2 A=2" ${TOOL} compare ${WORK}/pp2m1d2/${final} ${WORK}/pp2m1a2/${final} 0)

# An MoE config (shared expert, both aux losses; MoE blocks on both stages). Its load-balancing
# terms are per micro-batch, so the one process runs M micro-batches of B / M rows: --batch-size 2
# --grad-accum 2.
file(WRITE ${WORK}/moe.json [=[
{"vocab_size": 64, "d_model": 16, "n_layers": 4, "n_heads": 2, "ffn_hidden": 32, "max_seq_len": 16,
 "dropout": 0, "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 8, "n_shared": 1, "every": 2,
 "aux_loss_coef": 0.01, "router_z_loss_coef": 0.001}}
]=])
set(moe train --config ${WORK}/moe.json --data ${WORK}/train.bin --sequential --seq-len 16
    --steps 6 --warmup 2 --lr 1e-2 --log-every 1 --batch-size 4)
run("MoE P=1" ${EMBER} ${moe} --batch-size 2 --grad-accum 2 --out ${WORK}/moe1)
run("MoE P=2" ${mpirun} -np 2 ${EMBER} ${moe} --pp 2 --out ${WORK}/moe2)
run("MoE P=2 metrics = P=1" ${TOOL} metrics ${WORK}/moe2 ${WORK}/moe1 ${reassociated})
run("MoE P=2 weights = P=1" ${TOOL} compare ${WORK}/moe2/step_00000006.h5 ${WORK}/moe1/step_00000006.h5
    ${reassociated})

resume_layout(tp2_pp2_at_1 tp2_pp2 1)
run("(2,2,1) resumed at (1,1,1) = P=1" ${TOOL} compare ${WORK}/tp2_pp2_at_1/${final} ${WORK}/p1/${final}
    ${reassociated})
resume_layout(tp2_pp2_at_pp2_dp2 tp2_pp2 4 --pp 2 --batch-size 2)  # the same global batch: 2 x 2 rows
run("(2,2,1) resumed at (1,2,2) = P=1" ${TOOL} compare ${WORK}/tp2_pp2_at_pp2_dp2/${final}
    ${WORK}/p1/${final} ${reassociated})
resume_layout(pp2_at_pp2 pp2 2 --pp 2)
run("(1,2,1) resumed at (1,2,1) = (1,2,1)" ${TOOL} compare ${WORK}/pp2_at_pp2/${final} ${WORK}/pp2/${final} 0)

# Refused up front, one line, nothing trained.
expect_failure("--pp 3 on 2 ranks" "--tp 1 --pp 3 needs a world size divisible by 3, got 2" 2 --pp 3)
expect_failure("--pp with --zero 3" "--pp and --zero 3 cannot be combined yet (use --zero 0 or 1)" 2 --pp 2 --zero 3)
expect_failure("--micro-batches 3, batch 4" "--batch-size 4 is not divisible by --micro-batches 3" 2
               --pp 2 --micro-batches 3)
expect_failure("--micro-batches without --pp" "--micro-batches needs --pp 2 or more" 1 --micro-batches 2)
expect_failure("--pp-layers summing to 5" "--pp-layers" 2 --pp 2 --pp-layers 2,3)
expect_failure("--pp 5, 4 blocks" "--pp" 5 --pp 5)
file(REMOVE_RECURSE ${WORK})
