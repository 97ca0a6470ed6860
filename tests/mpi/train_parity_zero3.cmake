# ZeRO-3 `ember train` (docs/scaling.md#zero-3) against --zero 0 on the tiny model
# of train_parity_zero.cmake: the same losses and gradient norms per step and
# the same final weights at W = 2 and W = 3 (uneven shards of every block),
# with --grad-accum 2 and a --clip that triggers, with --dtype bf16, with
# --checkpoint-activations (the recompute gathers the block again), with
# validation every 5 steps (every rank evaluates, gathering block by block;
# the validation losses equal --zero 0's, where rank 0 evaluates alone), and
# resumed across world sizes (ZeRO-3 at 2 ranks on 1; ZeRO-0 at 1 on 3 ranks
# with ZeRO-3). 12 rows per micro-step: W 3 x B 4 = W 2 x B 6 = W 1 x B 12.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} data ${WORK})
set(common train --config ${WORK}/tiny.json --data ${WORK}/train.bin --sequential --seq-len 16
    --steps 10 --warmup 2 --lr 1e-2 --log-every 5 --save-every 5 --bucket-mb 1)
set(final step_00000010.h5)
function(same what a b)
  run("${what}: steps" ${TOOL} metrics ${WORK}/${a} ${WORK}/${b})
  run("${what}: weights" ${TOOL} compare ${WORK}/${a}/${final} ${WORK}/${b}/${final})
endfunction()

run("W=2 B=6" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 6
    --val-data ${WORK}/train.bin --eval-every 5 --eval-batches 2 --out ${WORK}/w2)
run("W=2 B=6 ZeRO-3" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 6 --zero 3
    --val-data ${WORK}/train.bin --eval-every 5 --eval-batches 2 --out ${WORK}/w2z3)
same("W=2 ZeRO-3 = ZeRO-0" w2z3 w2)
run("W=3 B=4 ZeRO-3" ${mpirun} -np 3 ${EMBER} ${common} --batch-size 4 --zero 3 --out ${WORK}/w3z3)
same("W=3 ZeRO-3 = W=2 ZeRO-0" w3z3 w2)
run("W=2 ZeRO-3 checkpointed" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 6 --zero 3
    --checkpoint-activations --out ${WORK}/w2z3ck)
same("W=2 ZeRO-3 --checkpoint-activations = ZeRO-0" w2z3ck w2)

# Gradient accumulation with clipping (the norm is ~0.5: --clip 0.1 clips every step).
set(accum --batch-size 3 --grad-accum 2 --clip 0.1)
run("W=2 A=2 clip" ${mpirun} -np 2 ${EMBER} ${common} ${accum} --out ${WORK}/w2a2)
run("W=2 A=2 clip ZeRO-3" ${mpirun} -np 2 ${EMBER} ${common} ${accum} --zero 3 --out ${WORK}/w2a2z3)
same("W=2 A=2 clip: ZeRO-3 = ZeRO-0" w2a2z3 w2a2)

# bf16 autocast.
run("W=2 bf16" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 6 --dtype bf16 --out ${WORK}/w2bf)
run("W=2 bf16 ZeRO-3" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 6 --dtype bf16 --zero 3
    --out ${WORK}/w2bfz3)
same("W=2 bf16: ZeRO-3 = ZeRO-0" w2bfz3 w2bf)

# Resume step 5 of a run in another folder (its checkpoint and `latest` only).
function(resume what from dir)
  cmake_parse_arguments(R "" "" "LAUNCH;OPTS" ${ARGN})
  file(MAKE_DIRECTORY ${WORK}/${dir})
  file(COPY ${WORK}/${from}/step_00000005.h5 DESTINATION ${WORK}/${dir})
  file(WRITE ${WORK}/${dir}/latest "step_00000005.h5\n")
  run("${what}" ${R_LAUNCH} ${EMBER} train --resume ${WORK}/${dir} ${R_OPTS})
  run("${what} = unbroken" ${TOOL} compare ${WORK}/${dir}/${final} ${WORK}/w2/${final})
endfunction()
resume("ZeRO-3 W=2 -> W=1" w2z3 r21 OPTS --batch-size 12 --zero 0)
run("W=1 B=12" ${EMBER} ${common} --batch-size 12 --out ${WORK}/w1)
resume("ZeRO-0 W=1 -> ZeRO-3 W=3" w1 r13 LAUNCH ${mpirun} -np 3 OPTS --batch-size 4 --zero 3)
file(REMOVE_RECURSE ${WORK})
