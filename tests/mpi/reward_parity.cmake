# Data-parallel `ember reward` (docs/model.md#reward-model) against one process on a tiny base
# (tied embeddings) and 24 preference pairs of different lengths, in the default (shuffled)
# order, the same for every world size: mpirun -np 2 with batch 2 logs the loss, gradient norm,
# margin and accuracy (also on the held-out pairs) of batch 4 and of batch 2 x grad-accum 2 on
# one process and ends with their trained tensors, the score head among them (relative error
# < 1e-5 per tensor): LoRA; --full with --center-rewards under ZeRO-3 (the score head reads the
# hidden states, so the tied token table is never read by a head); a LoRA run saved at W = 2
# resumes at W = 1 to the unbroken run; a bad pair line fails every rank with its message,
# never a hang, and writes no --out.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} pairs ${WORK})
set(common reward --base ${WORK}/base.h5 --data ${WORK}/pairs.jsonl --seq-len 32 --steps 4
    --warmup 1 --lr 1e-2 --val-fraction 0.25 --eval-every 2 --log-every 2)
set(final step_00000004.h5)

# LoRA (and the head). (With --center-rewards 0.1, B 4 and B 2 x A 2 on one process already end
# 1.3e-5 apart in a lora_B: AdamW's first steps amplify the order of the sums.)
run("lora W=1 B=4" ${EMBER} ${common} --batch-size 4 --out ${WORK}/lora1)
run("lora W=1 B=2 A=2" ${EMBER} ${common} --batch-size 2 --grad-accum 2 --out ${WORK}/lora1a2)
run("lora W=2 B=2" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 2 --save-every 2 --check-every 1
    --out ${WORK}/lora2)
run("lora W=2 = W=1 B=4: steps" ${TOOL} metrics ${WORK}/lora2 ${WORK}/lora1)
run("lora W=2 = W=1 A=2: steps" ${TOOL} metrics ${WORK}/lora2 ${WORK}/lora1a2)
run("lora W=2 = W=1 B=4: trained" ${TOOL} compare ${WORK}/lora2/${final} ${WORK}/lora1/${final})
run("lora W=2 = W=1 A=2: trained" ${TOOL} compare ${WORK}/lora2/${final} ${WORK}/lora1a2/${final})

# --full under ZeRO-3 (the score head in the non-block unit), with --center-rewards.
run("--full W=1" ${EMBER} ${common} --full --lr 1e-3 --center-rewards 0.1 --batch-size 4
    --out ${WORK}/full1)
run("--full W=2 ZeRO-3" ${mpirun} -np 2 ${EMBER} ${common} --full --lr 1e-3 --center-rewards 0.1
    --zero 3 --batch-size 2 --out ${WORK}/full2z3)
run("--full ZeRO-3 = W=1: steps" ${TOOL} metrics ${WORK}/full2z3 ${WORK}/full1)
run("--full ZeRO-3 = W=1: weights" ${TOOL} compare ${WORK}/full2z3/${final} ${WORK}/full1/${final})

# Resume the W = 2 LoRA run's step 2 on one process with --batch-size 4.
file(MAKE_DIRECTORY ${WORK}/resume)
file(COPY ${WORK}/lora2/step_00000002.h5 DESTINATION ${WORK}/resume)
file(WRITE ${WORK}/resume/latest "step_00000002.h5\n")
run("resume at W=1" ${EMBER} reward --resume ${WORK}/resume --batch-size 4)
run("resumed = unbroken" ${TOOL} compare ${WORK}/resume/${final} ${WORK}/lora1/${final})

file(WRITE ${WORK}/bad.jsonl "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n{not json\n")
execute_process(COMMAND ${mpirun} -np 2 ${EMBER} reward --base ${WORK}/base.h5 --data ${WORK}/bad.jsonl
                        --seq-len 32 --out ${WORK}/bad
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
check_failed_job("a bad pair line" "bad.jsonl line 2" "${rc}" "${out}${err}")
if(EXISTS ${WORK}/bad)
  message(FATAL_ERROR "a bad pair line: --out was written")
endif()
file(REMOVE_RECURSE ${WORK})
