# Data-parallel `ember rl` (docs/cli.md#rl-from-a-reward) against one process on a tiny base, 16
# prompts and a reward model trained here for 2 steps: mpirun -np 2 with --batch-size 2 samples
# the completions of one process's --batch-size 4 (the same prompts, seeds and so tokens, in the
# same order in --rollouts-out), logs its reward, kl, clip fraction, loss and gradient norm and
# ends with its parameters (relative error < 1e-5 per tensor): grpo LoRA with --iterations 2, ppo
# LoRA (its advantages whitened over both ranks' tokens), grpo --full under ZeRO-1; a W = 2 run's
# step 2 resumes at W = 1 to the unbroken run; a bad prompt line fails every rank with its
# message, never a hang, and writes no --out.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} prompts ${WORK})
run("reward model" ${EMBER} reward --base ${WORK}/base.h5 --data ${WORK}/pairs.jsonl --steps 2
    --batch-size 2 --seq-len 32 --val-fraction 0 --out ${WORK}/rm)
set(common rl --base ${WORK}/base.h5 --prompts ${WORK}/prompts.jsonl --reward-model
    ${WORK}/rm/step_00000002.h5 --group-size 4 --max-tokens 12 --steps 4 --warmup 1 --lr 1e-2
    --schedule constant --val-fraction 0.25 --eval-every 2 --log-every 2)
set(final step_00000004.h5)

# One process at batch 4, two ranks at batch 2: rollouts, steps and final tensors.
function(w2_equals_w1 name prefix)
  run("${name} W=1 B=4" ${EMBER} ${common} ${ARGN} --batch-size 4 --out ${WORK}/${prefix}1
      --rollouts-out ${WORK}/${prefix}1.jsonl)
  run("${name} W=2 B=2" ${mpirun} -np 2 ${EMBER} ${common} ${ARGN} --batch-size 2 --save-every 2
      --check-every 1 --out ${WORK}/${prefix}2 --rollouts-out ${WORK}/${prefix}2.jsonl)
  run("${name} W=2 = W=1: rollouts" ${TOOL} rollouts ${WORK}/${prefix}2.jsonl ${WORK}/${prefix}1.jsonl)
  run("${name} W=2 = W=1: steps" ${TOOL} metrics ${WORK}/${prefix}2 ${WORK}/${prefix}1)
  run("${name} W=2 = W=1: weights" ${TOOL} compare ${WORK}/${prefix}2/${final} ${WORK}/${prefix}1/${final})
endfunction()

w2_equals_w1("grpo LoRA" grpo --iterations 2)
w2_equals_w1("ppo LoRA" ppo --algo ppo)
w2_equals_w1("grpo --full ZeRO-1" full --full --lr 1e-3 --zero 1)

# The W = 2 ppo run's step 2 resumed on one process with --batch-size 4.
file(MAKE_DIRECTORY ${WORK}/resume)
file(COPY ${WORK}/ppo2/step_00000002.h5 DESTINATION ${WORK}/resume)
file(WRITE ${WORK}/resume/latest "step_00000002.h5\n")
run("resume at W=1" ${EMBER} rl --resume ${WORK}/resume --batch-size 4)
run("resumed = unbroken" ${TOOL} compare ${WORK}/resume/${final} ${WORK}/ppo1/${final})

# A bad prompt line fails every rank with its message.
file(WRITE ${WORK}/bad.jsonl "{\"prompt\": \"a\", \"answer\": \"b\"}\n{not json\n")
execute_process(COMMAND ${mpirun} -np 2 ${EMBER} rl --base ${WORK}/base.h5 --prompts ${WORK}/bad.jsonl
                        --reward match --out ${WORK}/bad
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
check_failed_job("a bad prompt line" "bad.jsonl line 2" "${rc}" "${out}${err}")
if(EXISTS ${WORK}/bad)
  message(FATAL_ERROR "a bad prompt line: --out was written")
endif()
file(REMOVE_RECURSE ${WORK})
