# Data-parallel `ember finetune` (docs/model.md#loss-of-a-step) against one process on a
# tiny base and chat rows padded to different lengths, with --sequential: mpirun -np 2 with
# batch 2 logs the loss, gradient norm and trained tokens of batch 4 and of batch 2 x
# grad-accum 2 on one process and ends with their parameters (relative error < 1e-5 per
# tensor), with --full and with LoRA, also with --zero 2 (ZeRO-2) and --full with --zero 3 (LoRA with --zero 3 is refused); a run saved at W = 2 resumes at W = 1 to the unbroken run; a bad chat line fails
# every rank with its message, never a hang.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} chat ${WORK})
set(common finetune --full --base ${WORK}/base.h5 --data ${WORK}/chat.jsonl --sequential --seq-len 32
    --steps 4 --warmup 1 --lr 1e-2 --val-fraction 0.25 --log-every 2)
run("W=1 B=4" ${EMBER} ${common} --batch-size 4 --out ${WORK}/w1b4)
run("W=1 B=2 A=2" ${EMBER} ${common} --batch-size 2 --grad-accum 2 --out ${WORK}/w1a2)
run("W=2 B=2" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 2 --save-every 2 --check-every 1 --out ${WORK}/w2)
set(final step_00000004.h5)
run("W=2 = W=1 B=4: steps" ${TOOL} metrics ${WORK}/w2 ${WORK}/w1b4)
run("W=2 = W=1 A=2: steps" ${TOOL} metrics ${WORK}/w2 ${WORK}/w1a2)
run("W=2 = W=1 B=4: weights" ${TOOL} compare ${WORK}/w2/${final} ${WORK}/w1b4/${final})
run("W=2 = W=1 A=2: weights" ${TOOL} compare ${WORK}/w2/${final} ${WORK}/w1a2/${final})
run("W=2 B=2 ZeRO-2" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 2 --zero 2 --bucket-mb 1 --out ${WORK}/w2z2)
run("W=2 ZeRO-2 = W=1 B=4: steps" ${TOOL} metrics ${WORK}/w2z2 ${WORK}/w1b4)
run("W=2 ZeRO-2 = W=1 B=4: weights" ${TOOL} compare ${WORK}/w2z2/${final} ${WORK}/w1b4/${final})
run("W=2 B=2 ZeRO-3" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 2 --zero 3 --out ${WORK}/w2z3)
run("W=2 ZeRO-3 = W=1 B=4: steps" ${TOOL} metrics ${WORK}/w2z3 ${WORK}/w1b4)
run("W=2 ZeRO-3 = W=1 B=4: weights" ${TOOL} compare ${WORK}/w2z3/${final} ${WORK}/w1b4/${final})

# LoRA (q, v, down adapters over the frozen base): the same for W = 2 and one process.
string(REPLACE "--full;" "" lora "${common}")
run("LoRA W=1 B=4" ${EMBER} ${lora} --lora-targets q,v,down --batch-size 4 --out ${WORK}/lora1)
run("LoRA W=2 B=2" ${mpirun} -np 2 ${EMBER} ${lora} --lora-targets q,v,down --batch-size 2 --out ${WORK}/lora2)
run("LoRA W=2 = W=1: steps" ${TOOL} metrics ${WORK}/lora2 ${WORK}/lora1)
run("LoRA W=2 = W=1: adapters" ${TOOL} compare ${WORK}/lora2/${final} ${WORK}/lora1/${final})
run("LoRA W=2 B=2 ZeRO-2" ${mpirun} -np 2 ${EMBER} ${lora} --lora-targets q,v,down --batch-size 2 --zero 2
    --out ${WORK}/lora2z2)
run("LoRA W=2 ZeRO-2 = W=1: steps" ${TOOL} metrics ${WORK}/lora2z2 ${WORK}/lora1)
run("LoRA W=2 ZeRO-2 = W=1: adapters" ${TOOL} compare ${WORK}/lora2z2/${final} ${WORK}/lora1/${final})
# ZeRO-3 shards the parameters it trains: a LoRA run (frozen base) is refused at the start.
execute_process(COMMAND ${mpirun} -np 2 ${EMBER} ${lora} --batch-size 2 --zero 3 --out ${WORK}/lora2z3
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
check_failed_job("LoRA ZeRO-3" "--zero 3 shards every parameter" "${rc}" "${out}${err}")

# Resume the W = 2 run's step 2 on one process with --batch-size 4.
file(MAKE_DIRECTORY ${WORK}/resume)
file(COPY ${WORK}/w2/step_00000002.h5 DESTINATION ${WORK}/resume)
file(WRITE ${WORK}/resume/latest "step_00000002.h5\n")
run("resume at W=1" ${EMBER} finetune --resume ${WORK}/resume --batch-size 4)
run("resumed = unbroken" ${TOOL} compare ${WORK}/resume/${final} ${WORK}/w1b4/${final})

file(WRITE ${WORK}/bad.jsonl "{\"text\": \"fine\"}\n{not json\n")
execute_process(COMMAND ${mpirun} -np 2 ${EMBER} finetune --full --base ${WORK}/base.h5 --data ${WORK}/bad.jsonl
                        --seq-len 32 --out ${WORK}/bad
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
check_failed_job("a bad chat line" "bad.jsonl line 2: not JSON" "${rc}" "${out}${err}")
if(EXISTS ${WORK}/bad)
  message(FATAL_ERROR "a bad chat line: --out was written")
endif()
file(REMOVE_RECURSE ${WORK})
