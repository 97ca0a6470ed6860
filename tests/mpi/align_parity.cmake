# Data-parallel `ember align` (docs/model.md#loss-of-an-alignment-step) against one process on a
# tiny base and 24 preference pairs of different lengths, in the default (shuffled) order, the
# same for every world size: mpirun -np 2 with batch 2 logs the loss, gradient norm, reward
# margins and accuracy (also on the held-out pairs) of batch 4 and of batch 2 x grad-accum 2 on
# one process and ends with their parameters (relative error < 1e-5 per tensor): LoRA dpo (the
# reference: the base with the adapters off, its log-probabilities shared among the ranks),
# LoRA orpo and --full simpo; --full dpo under ZeRO-3 (steps and reference); a LoRA run saved at W = 2 resumes at W = 1 to the unbroken run (the reference
# read back from OUT/ref_logps.json); a bad pair line fails every rank with its message,
# never a hang, and writes no --out.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/pair_parity.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} pairs ${WORK})
set(common align --base ${WORK}/base.h5 --data ${WORK}/pairs.jsonl --seq-len 32 --steps 4
    --warmup 1 --lr 1e-2 --val-fraction 0.25 --eval-every 2 --log-every 2)
set(final step_00000004.h5)

# LoRA dpo.
w2_equals_w1("dpo" dpo adapters)
file(READ ${WORK}/dpo1/ref_logps.json ref1)
file(READ ${WORK}/dpo2/ref_logps.json ref2)
if(NOT ref1 STREQUAL ref2)
  message(FATAL_ERROR "the reference log-probabilities of W = 2 differ from one process's")
endif()

# No reference: LoRA orpo, --full simpo. (--full dpo and orpo at --lr 1e-2 end 1-3e-5 apart
# after 4 steps, with step 1's gradient norms 1e-8 apart: their small, cancelling gradients let
# AdamW's first steps amplify the order of the sums over ranks.)
foreach(mode "orpo" "simpo;--full")
  list(GET mode 0 loss)
  string(REPLACE ";" " " name "${mode}")
  run("${name} W=1 B=4" ${EMBER} ${common} --loss ${mode} --batch-size 4 --out ${WORK}/${loss}1)
  run("${name} W=2 B=2" ${mpirun} -np 2 ${EMBER} ${common} --loss ${mode} --batch-size 2
      --out ${WORK}/${loss}2)
  run("${name} W=2 = W=1: steps" ${TOOL} metrics ${WORK}/${loss}2 ${WORK}/${loss}1)
  run("${name} W=2 = W=1: weights" ${TOOL} compare ${WORK}/${loss}2/${final} ${WORK}/${loss}1/${final})
endforeach()

# --full dpo under ZeRO-3: the ranks score the reference's batches in turns with every
# parameter held (the held-out pairs give them different numbers of batches).
run("dpo --full W=1" ${EMBER} ${common} --full --lr 1e-3 --batch-size 4 --out ${WORK}/full1)
run("dpo --full W=2 ZeRO-3" ${mpirun} -np 2 ${EMBER} ${common} --full --lr 1e-3 --zero 3
    --batch-size 2 --out ${WORK}/full2z3)
run("dpo --full ZeRO-3 = W=1: steps" ${TOOL} metrics ${WORK}/full2z3 ${WORK}/full1)
file(READ ${WORK}/full1/ref_logps.json ref1)
file(READ ${WORK}/full2z3/ref_logps.json ref2)
if(NOT ref1 STREQUAL ref2)
  message(FATAL_ERROR "the reference log-probabilities under ZeRO-3 differ from one process's")
endif()

# Resume the W = 2 dpo run's step 2 on one process with --batch-size 4.
resume_w2_at_w1(align dpo ref_logps.json)

bad_pair_line_fails(align)
file(REMOVE_RECURSE ${WORK})
