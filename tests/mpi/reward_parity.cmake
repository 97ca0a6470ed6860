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
include(${CMAKE_CURRENT_LIST_DIR}/pair_parity.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} pairs ${WORK})
set(common reward --base ${WORK}/base.h5 --data ${WORK}/pairs.jsonl --seq-len 32 --steps 4
    --warmup 1 --lr 1e-2 --val-fraction 0.25 --eval-every 2 --log-every 2)
set(final step_00000004.h5)

# LoRA (and the head). (With --center-rewards 0.1, B 4 and B 2 x A 2 on one process already end
# 1.3e-5 apart in a lora_B: AdamW's first steps amplify the order of the sums.)
w2_equals_w1("lora" lora trained)

# --full under ZeRO-3 (the score head in the non-block unit), with --center-rewards.
run("--full W=1" ${EMBER} ${common} --full --lr 1e-3 --center-rewards 0.1 --batch-size 4
    --out ${WORK}/full1)
run("--full W=2 ZeRO-3" ${mpirun} -np 2 ${EMBER} ${common} --full --lr 1e-3 --center-rewards 0.1
    --zero 3 --batch-size 2 --out ${WORK}/full2z3)
run("--full ZeRO-3 = W=1: steps" ${TOOL} metrics ${WORK}/full2z3 ${WORK}/full1)
run("--full ZeRO-3 = W=1: weights" ${TOOL} compare ${WORK}/full2z3/${final} ${WORK}/full1/${final})

# Resume the W = 2 LoRA run's step 2 on one process with --batch-size 4.
resume_w2_at_w1(reward lora)

bad_pair_line_fails(reward)
file(REMOVE_RECURSE ${WORK})
