# ZeRO-2 `ember train` (docs/scaling.md#zero-2) against --zero 0 on a tiny model
# and shard with --sequential: the same losses and gradient norms per step
# (metrics.jsonl) and the same final weights (relative error < 1e-5 per
# tensor) at W = 2 and W = 3 (uneven shards), with --grad-accum 2 and a
# --clip that triggers, with --dtype bf16, and its checkpoint resumed across
# world sizes (2 -> 1, 2 -> 3, 3 -> 2, 1 -> 2 with ZeRO-2). 12 rows per
# micro-step everywhere: W 3 x B 4 = W 2 x B 6 = W 1 x B 12.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
file(REMOVE_RECURSE ${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)

run("data" ${TOOL} data ${WORK})
set(common train --config ${WORK}/tiny.json --data ${WORK}/train.bin --sequential --seq-len 16
    --steps 10 --warmup 2 --lr 1e-2 --log-every 5 --save-every 5 --bucket-mb 1)
set(final step_00000010.h5)
# Same run folder pair: the same steps and the same final weights.
function(same what a b)
  run("${what}: steps" ${TOOL} metrics ${WORK}/${a} ${WORK}/${b})
  run("${what}: weights" ${TOOL} compare ${WORK}/${a}/${final} ${WORK}/${b}/${final})
endfunction()

run("W=3 B=4" ${mpirun} -np 3 ${EMBER} ${common} --batch-size 4 --out ${WORK}/w3)
run("W=3 B=4 ZeRO-2" ${mpirun} -np 3 ${EMBER} ${common} --batch-size 4 --zero 2 --out ${WORK}/w3z2)
same("W=3 ZeRO-2 = ZeRO-0" w3z2 w3)
run("W=2 B=6 ZeRO-2" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 6 --zero 2 --out ${WORK}/w2z2)
same("W=2 ZeRO-2 = W=3 ZeRO-0" w2z2 w3)

# Gradient accumulation with clipping (the norm is ~0.5: --clip 0.1 clips every step).
set(accum --batch-size 3 --grad-accum 2 --clip 0.1)
run("W=2 A=2 clip" ${mpirun} -np 2 ${EMBER} ${common} ${accum} --out ${WORK}/w2a2)
run("W=2 A=2 clip ZeRO-2" ${mpirun} -np 2 ${EMBER} ${common} ${accum} --zero 2 --out ${WORK}/w2a2z2)
same("W=2 A=2 clip: ZeRO-2 = ZeRO-0" w2a2z2 w2a2)
run("W=3 A=2 clip ZeRO-2" ${mpirun} -np 3 ${EMBER} ${common} --batch-size 2 --grad-accum 2 --clip 0.1
    --zero 2 --out ${WORK}/w3a2z2)
same("W=3 A=2 clip ZeRO-2 = W=2 ZeRO-0" w3a2z2 w2a2)

# bf16 autocast.
run("W=2 bf16" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 6 --dtype bf16 --out ${WORK}/w2bf)
run("W=2 bf16 ZeRO-2" ${mpirun} -np 2 ${EMBER} ${common} --batch-size 6 --dtype bf16 --zero 2
    --out ${WORK}/w2bfz2)
same("W=2 bf16: ZeRO-2 = ZeRO-0" w2bfz2 w2bf)

# Resume step 5 of a run in another folder (its checkpoint and `latest` only):
# resume(what from dir [LAUNCH mpirun args...] OPTS ember options...).
function(resume what from dir)
  cmake_parse_arguments(R "" "" "LAUNCH;OPTS" ${ARGN})
  file(MAKE_DIRECTORY ${WORK}/${dir})
  file(COPY ${WORK}/${from}/step_00000005.h5 DESTINATION ${WORK}/${dir})
  file(WRITE ${WORK}/${dir}/latest "step_00000005.h5\n")
  run("${what}" ${R_LAUNCH} ${EMBER} train --resume ${WORK}/${dir} ${R_OPTS})
  run("${what} = unbroken" ${TOOL} compare ${WORK}/${dir}/${final} ${WORK}/w3/${final})
endfunction()
resume("ZeRO-2 W=2 -> W=1" w2z2 r21 OPTS --batch-size 12)
resume("ZeRO-2 W=2 -> W=3" w2z2 r23 LAUNCH ${mpirun} -np 3 OPTS --batch-size 4)
resume("ZeRO-2 W=3 -> W=2" w3z2 r32 LAUNCH ${mpirun} -np 2 OPTS --batch-size 6)
run("W=1 B=12 ZeRO-2" ${EMBER} ${common} --batch-size 12 --zero 2 --out ${WORK}/w1z2)
same("W=1 ZeRO-2 = W=3 ZeRO-0" w1z2 w3)
resume("ZeRO-2 W=1 -> W=2" w1z2 r12 LAUNCH ${mpirun} -np 2 OPTS --batch-size 6)
resume("ZeRO-0 W=3 -> ZeRO-2 W=2" w3 r32p LAUNCH ${mpirun} -np 2 OPTS --batch-size 6 --zero 2)
file(REMOVE_RECURSE ${WORK})
