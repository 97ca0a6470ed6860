# `mpirun ember finetune --pp 2` (docs/scaling.md#pipeline-parallelism-in-ember-train) against
# one process on the same micro-batches: a rank's batch of 4 chat rows (padded to different
# lengths, clipped at a norm every step reaches, validated every 2 steps through the stages) cut
# into M = 2 micro-batches equals one process with --batch-size 2 --grad-accum 2. The losses,
# trained tokens, gradient norms and validation losses of every step (train_parity_tool metrics)
# and the final trained tensors (compare, relative 1e-5) match for --full, LoRA on a tied base
# (targets q, v, o, down, head: the head's adapter over the tied table on the last stage) and an
# untied one (k, up, down, head), QLoRA (nf4 tied, nf4-dq untied), with gpipe,
# --checkpoint-activations and --dtype bf16, for an MoE base (its real-token mask through the
# stages) and at (T, P, D) = (1, 2, 2). Measured: LoRA and QLoRA equal one process bit for bit
# (no table gradient summed over the stages), --full and MoE within 2.3e-7. A LoRA checkpoint
# saved at P = 2 is the one-process file (base, trained tensors only, their AdamW moments and
# step counts: compare-state; measured equal, --full's moments within 4.2e-7) and resumes at
# P = 1 to the unbroken run, at P = 2 bit for bit (--full too); one saved at P = 1 resumes at
# P = 2. Combinations not available are refused in one line. Variables: EMBER, TOOL, MPIRUN,
# WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/layout_runs.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} chat ${WORK})
run("untied data" ${TOOL} chat ${WORK}/untied untied)
run("MoE data" ${TOOL} chat ${WORK}/moe moe)
set(options --data ${WORK}/chat.jsonl --sequential --seq-len 32 --steps 4 --warmup 1 --lr 1e-2
    --clip 0.5 --val-fraction 0.25 --log-every 1 --eval-every 2 --save-every 2)
set(common finetune --base ${WORK}/base.h5 ${options})
set(final step_00000004.h5)
set(reassociated 1e-5)

# one(name [options...]): the one-process reference of --batch-size 4 at M = 2.
function(one name)
  run("${name}" ${EMBER} ${common} --batch-size 2 --grad-accum 2 --out ${WORK}/${name} ${ARGN})
endfunction()

one(full1 --full)
same_as_one(full2 2 full1 --full --pp 2 --batch-size 4)
# (1, 2, 2): two pipelines of batch 4 each, M = 2, against one process's 4 micro-batches of 2.
one(full1_a4 --full --grad-accum 4)
same_as_one(full2_dp2 4 full1_a4 --full --pp 2 --batch-size 4 --check-every 2)

set(tied_targets --lora-targets q,v,o,down,head)
one(lora1 ${tied_targets})
same_as_one(lora2 2 lora1 ${tied_targets} --pp 2 --batch-size 4)
# The model FLOPs of a step count every stage's trained tensors (a LoRA step's: 4 per frozen
# and 6 per trained parameter and token).
foreach(run lora1 lora2)
  file(STRINGS ${WORK}/${run}/metrics.jsonl records)
  list(GET records 1 first_step)
  string(JSON ${run}_flops GET "${first_step}" flops)
endforeach()
if(NOT lora1_flops STREQUAL lora2_flops)
  message(FATAL_ERROR "the model FLOPs of a step: ${lora2_flops} at P = 2, ${lora1_flops} in one process")
endif()
same_as_one(lora2_gpipe 2 lora1 ${tied_targets} --pp 2 --batch-size 4 --pp-schedule gpipe)
same_as_one(lora2_recompute 2 lora1 ${tied_targets} --pp 2 --batch-size 4 --checkpoint-activations)
one(lora1_bf16 ${tied_targets} --dtype bf16)
same_as_one(lora2_bf16 2 lora1_bf16 ${tied_targets} --pp 2 --batch-size 4 --dtype bf16)
one(qlora1 ${tied_targets} --quantize nf4)
same_as_one(qlora2 2 qlora1 ${tied_targets} --quantize nf4 --pp 2 --batch-size 4)

# An untied base: the head's adapter wraps lm_head on the last stage.
set(common finetune --base ${WORK}/untied/base.h5 ${options})
set(untied_targets --lora-targets k,up,down,head)
one(untied1 ${untied_targets})
same_as_one(untied2 2 untied1 ${untied_targets} --pp 2 --batch-size 4)
one(untied_dq1 ${untied_targets} --quantize nf4-dq)
same_as_one(untied_dq2 2 untied_dq1 ${untied_targets} --quantize nf4-dq --pp 2 --batch-size 4)

# MoE blocks on both stages: the aux and router z-losses over each micro-batch's real tokens.
set(common finetune --base ${WORK}/moe/base.h5 ${options})
one(moe1 --full)
same_as_one(moe2 2 moe1 --full --pp 2 --batch-size 4)

# The P = 2 LoRA checkpoint is the one-process file: the trained tensors only (compare fails on
# another count of tensors), their AdamW moments and step counts, naming the base and its
# sha256 (the resume at P = 1 below reads the base by them).
set(common finetune --base ${WORK}/base.h5 ${options})
run("LoRA P=2 file = P=1 file" ${TOOL} compare-state ${WORK}/lora2/step_00000002.h5
    ${WORK}/lora1/step_00000002.h5 ${reassociated})
run("--full P=2 file = P=1 file" ${TOOL} compare-state ${WORK}/full2/step_00000002.h5
    ${WORK}/full1/step_00000002.h5 ${reassociated})

# resume_at(name source step np [options...]): step `step` of run `source` copied into WORK/name
# and resumed on np ranks with the options.
function(resume_at name source step np)
  file(MAKE_DIRECTORY ${WORK}/${name})
  file(COPY ${WORK}/${source}/${step} DESTINATION ${WORK}/${name})
  file(WRITE ${WORK}/${name}/latest "${step}\n")
  run("resume ${name}" ${mpirun} -np ${np} ${EMBER} finetune --resume ${WORK}/${name} ${ARGN})
endfunction()
resume_at(lora2_at_1 lora2 step_00000002.h5 1 --batch-size 2 --grad-accum 2)
run("LoRA P=2 resumed at P=1 = P=1" ${TOOL} compare ${WORK}/lora2_at_1/${final} ${WORK}/lora1/${final}
    ${reassociated})
resume_at(lora1_at_2 lora1 step_00000002.h5 2 --pp 2 --batch-size 4 --grad-accum 1)
run("LoRA P=1 resumed at P=2 = P=1" ${TOOL} compare ${WORK}/lora1_at_2/${final} ${WORK}/lora1/${final}
    ${reassociated})
resume_at(lora2_at_2 lora2 step_00000002.h5 2 --pp 2)
run("LoRA P=2 resumed at P=2 = P=2" ${TOOL} compare ${WORK}/lora2_at_2/${final} ${WORK}/lora2/${final} 0)
resume_at(full2_at_2 full2 step_00000002.h5 2 --pp 2)
run("--full P=2 resumed at P=2 = P=2" ${TOOL} compare ${WORK}/full2_at_2/${final} ${WORK}/full2/${final} 0)

expect_failure("--pp with --add-chat-tokens" "--pp and --add-chat-tokens cannot be combined yet" 2
               --batch-size 4 --pp 2 --add-chat-tokens)
expect_failure("--pp with --zero 1" "--pp and --zero 1 cannot be combined yet in ember finetune" 2
               --batch-size 4 --pp 2 --zero 1)
expect_failure("--micro-batches 3, batch 4" "--batch-size 4 is not divisible by --micro-batches 3" 2
               --batch-size 4 --pp 2 --micro-batches 3)
expect_failure("--pp 3 on 2 ranks" "--tp 1 --pp 3 needs a world size divisible by 3, got 2" 2
               --batch-size 4 --pp 3)
run("pairs" ${TOOL} pairs ${WORK}/pairs)
foreach(command align reward)
  set(common ${command} --base ${WORK}/pairs/base.h5 --data ${WORK}/pairs/pairs.jsonl)
  expect_failure("--pp with ember ${command}" "--pp and ember ${command} cannot be combined yet" 2
                 --batch-size 4 --pp 2)
endforeach()
file(REMOVE_RECURSE ${WORK})
