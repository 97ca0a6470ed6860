# `mpirun -np 2 ember finetune --tp 2` (docs/scaling.md#tensor-parallelism-in-ember-train)
# against one process on the same batches of a tiny chat base (train_parity_tool chat: 2 heads,
# vocabulary 264): LoRA on every target (q, k, v, gate, up and the tied head column-parallel, o
# and down row-parallel), QLoRA over NF4 and NF4-dq bases, --full, and LoRA with dropout over an
# untied head: the losses, gradient norms, trained tokens and validation losses of every step
# (train_parity_tool metrics) and the final trained tensors (relative 1e-4 per tensor: the
# row-parallel sums add the halves of each product in another order) match. At (T, P, D) =
# (2, 1, 2) the reducer runs over the ranks holding the same shards; at (2, 2, 1) the tensor pairs
# of two stages equal one process with --grad-accum 2 (LoRA, QLoRA); --checkpoint-activations
# changes nothing (bit for bit). A LoRA checkpoint is the
# one process's (the adapters gathered whole, naming the base): saved at T = 2 it resumes on one
# process, saved on one process it resumes at T = 2, and at T = 2 it resumes bit for bit. What
# --tp does not combine with in fine-tuning is refused in one line.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/layout_runs.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} chat ${WORK})
run("untied base" ${TOOL} chat ${WORK}/untied untied)
set(steps --data ${WORK}/chat.jsonl --sequential --seq-len 32 --steps 4 --warmup 1 --lr 1e-2
    --val-fraction 0.25 --log-every 1 --save-every 2 --batch-size 4)
set(common finetune --base ${WORK}/base.h5 ${steps})
set(final step_00000004.h5)
set(reassociated 1e-4)
set(every_target --lora-targets q,k,v,o,gate,up,down,head)

# tp_pair(name options...): the run on one process and at --tp 2, compared step by step and by
# their final trained tensors.
function(tp_pair name)
  run("${name} T=1" ${EMBER} ${common} ${ARGN} --out ${WORK}/${name}1)
  run("${name} T=2" ${mpirun} -np 2 ${EMBER} ${common} ${ARGN} --tp 2 --out ${WORK}/${name}2)
  run("${name}: T=2 metrics = T=1" ${TOOL} metrics ${WORK}/${name}2 ${WORK}/${name}1)
  run("${name}: T=2 tensors = T=1" ${TOOL} compare ${WORK}/${name}2/${final} ${WORK}/${name}1/${final}
      ${reassociated})
endfunction()

tp_pair(lora ${every_target})
tp_pair(nf4 ${every_target} --quantize nf4)
tp_pair(nf4dq --lora-targets q,o,down --quantize nf4-dq)
tp_pair(full --full)

# (T, P, D) = (2, 1, 2): two pairs of tensor ranks, batch 2 each, against one process at batch 4.
run("LoRA T=2 D=2" ${mpirun} -np 4 ${EMBER} ${common} ${every_target} --batch-size 2 --tp 2 --check-every 1
    --out ${WORK}/lora_d2)
run("LoRA T=2 D=2 metrics = T=1" ${TOOL} metrics ${WORK}/lora_d2 ${WORK}/lora1)
run("LoRA T=2 D=2 tensors = T=1" ${TOOL} compare ${WORK}/lora_d2/${final} ${WORK}/lora1/${final} ${reassociated})

# (T, P, D) = (2, 2, 1): two stages of tensor pairs, the batch of 4 in 2 micro-batches, against
# one process at batch 2 with --grad-accum 2, LoRA and QLoRA.
foreach(kind lora nf4)
  set(quantize "")
  if(kind STREQUAL "nf4")
    set(quantize --quantize nf4)
  endif()
  run("${kind} T=1 B=2 A=2" ${EMBER} ${common} ${every_target} ${quantize} --batch-size 2 --grad-accum 2
      --out ${WORK}/${kind}_a2)
  run("${kind} (2,2,1)" ${mpirun} -np 4 ${EMBER} ${common} ${every_target} ${quantize} --tp 2 --pp 2
      --out ${WORK}/${kind}_tp2pp2)
  run("${kind} (2,2,1) metrics = T=1 A=2" ${TOOL} metrics ${WORK}/${kind}_tp2pp2 ${WORK}/${kind}_a2)
  run("${kind} (2,2,1) tensors = T=1 A=2" ${TOOL} compare ${WORK}/${kind}_tp2pp2/${final} ${WORK}/${kind}_a2/${final}
      ${reassociated})
endforeach()

# An untied head with an adapter of its own, adapter dropout (the row-parallel o and down take
# their columns of the one-process mask), resumed across T.
set(common finetune --base ${WORK}/untied/base.h5 ${steps})
tp_pair(dropout --lora-targets q,o,down,head --lora-dropout 0.1)
# resume(name source np): step 2 of run `source` resumed on np ranks at --tp np.
function(resume name source np)
  file(MAKE_DIRECTORY ${WORK}/${name})
  file(COPY ${WORK}/${source}/step_00000002.h5 DESTINATION ${WORK}/${name})
  file(WRITE ${WORK}/${name}/latest "step_00000002.h5\n")
  run("resume ${name}" ${mpirun} -np ${np} ${EMBER} finetune --resume ${WORK}/${name} --tp ${np})
endfunction()
# Recomputed blocks replay the adapters' dropout masks and all-reduces: bit for bit.
run("dropout T=2 recomputed" ${mpirun} -np 2 ${EMBER} ${common} --lora-targets q,o,down,head --lora-dropout 0.1
    --tp 2 --checkpoint-activations --out ${WORK}/recomputed)
run("T=2 recomputed = T=2" ${TOOL} compare ${WORK}/recomputed/${final} ${WORK}/dropout2/${final} 0)
resume(t2_at_t1 dropout2 1)
run("T=2 resumed at T=1 = T=1" ${TOOL} compare ${WORK}/t2_at_t1/${final} ${WORK}/dropout1/${final} ${reassociated})
resume(t1_at_t2 dropout1 2)
run("T=1 resumed at T=2 = T=1" ${TOOL} compare ${WORK}/t1_at_t2/${final} ${WORK}/dropout1/${final} ${reassociated})
resume(t2_at_t2 dropout2 2)
run("T=2 resumed at T=2 = T=2" ${TOOL} compare ${WORK}/t2_at_t2/${final} ${WORK}/dropout2/${final} 0)

# Refused up front, one line, nothing trained.
expect_failure("finetune --tp with --zero" "--tp and --zero cannot be combined yet in ember finetune" 2
               --tp 2 --zero 1)
expect_failure("finetune --tp with --add-chat-tokens" "--tp and --add-chat-tokens cannot be combined yet" 2
               --tp 2 --add-chat-tokens)
# A base whose o_proj [48, 48] NF4 blocks (64 values) straddle the column split at T = 2 (made by
# ember train with a tokenizer of its own, which has the ChatML tokens).
file(WRITE ${WORK}/d48.json [=[
{"vocab_size": 270, "d_model": 48, "n_layers": 1, "n_heads": 2, "ffn_hidden": 64, "max_seq_len": 64,
 "dropout": 0}
]=])
run("d_model 48 base" ${EMBER} train --config ${WORK}/d48.json --data ${WORK}/chat.jsonl --vocab-size 270
    --steps 1 --batch-size 2 --seq-len 16 --out ${WORK}/d48)
execute_process(COMMAND ${mpirun} -np 2 ${EMBER} finetune --base ${WORK}/d48/step_00000001.h5 ${steps}
                        --quantize nf4 --tp 2 --out ${WORK}/refused
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
check_failed_job("nf4 blocks across the split" "--tp 2: model.layers.0.self_attn.o_proj.weight: the NF4 blocks of 64 elements of [48, 48] do not align with its columns [0, 24)" "${rc}" "${out}${err}")
if(EXISTS ${WORK}/refused)
  message(FATAL_ERROR "a refused run left --out behind")
endif()
foreach(command align reward)
  execute_process(COMMAND ${mpirun} -np 2 ${EMBER} ${command} --base ${WORK}/base.h5 ${steps} --tp 2
                          --out ${WORK}/refused
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  check_failed_job("${command} --tp" "--tp and ember ${command} cannot be combined yet" "${rc}" "${out}${err}")
endforeach()
file(REMOVE_RECURSE ${WORK})
