# What the tensor- and pipeline-parallel scripts (train_parity_tp.cmake, train_parity_pp.cmake,
# finetune_parity_pp.cmake) share, over their variables EMBER, TOOL, WORK, `mpirun`, `common`
# (the command line of their runs), `final` (the last checkpoint's name) and `reassociated`
# (the bound of a comparison); needs failed_job.cmake.

# same_as_one(name np reference [options...]): the run of `common` and the options at np ranks
# equals run `reference`, step by step and in its final tensors.
function(same_as_one name np reference)
  run("${name}" ${mpirun} -np ${np} ${EMBER} ${common} --out ${WORK}/${name} ${ARGN})
  run("${name} metrics = ${reference}" ${TOOL} metrics ${WORK}/${name} ${WORK}/${reference} ${reassociated})
  run("${name} weights = ${reference}" ${TOOL} compare ${WORK}/${name}/${final} ${WORK}/${reference}/${final}
      ${reassociated})
endfunction()

# bf16_same_as_one(config [layout options...]): 3 steps of bf16 matmuls (a weight that rounds
# differently in float32 flips its bf16 value later) of model `config` on 2 ranks with the layout
# options equal those on one process.
function(bf16_same_as_one config)
  set(bf16 train --config ${config} --data ${WORK}/train.bin --sequential --seq-len 16 --steps 3
      --warmup 2 --lr 1e-2 --clip 0.5 --log-every 1 --batch-size 4 --dtype bf16)
  run("bf16 one process" ${EMBER} ${bf16} --out ${WORK}/bf16_1)
  run("bf16 ${ARGN}" ${mpirun} -np 2 ${EMBER} ${bf16} ${ARGN} --out ${WORK}/bf16_2)
  run("bf16 ${ARGN} metrics = one process" ${TOOL} metrics ${WORK}/bf16_2 ${WORK}/bf16_1)
  run("bf16 ${ARGN} weights = one process" ${TOOL} compare ${WORK}/bf16_2/step_00000003.h5
      ${WORK}/bf16_1/step_00000003.h5 ${reassociated})
endfunction()

# resume_layout(name source-run np [layout options...]): step 5 of source-run copied into
# WORK/name and resumed on np ranks with the layout options.
function(resume_layout name source np)
  file(MAKE_DIRECTORY ${WORK}/${name})
  file(COPY ${WORK}/${source}/step_00000005.h5 DESTINATION ${WORK}/${name})
  file(WRITE ${WORK}/${name}/latest "step_00000005.h5\n")
  run("resume ${name}" ${mpirun} -np ${np} ${EMBER} train --resume ${WORK}/${name} ${ARGN})
endfunction()

# expect_failure(what expect np [options...]): the run of `common` with the options on np ranks
# is refused up front with one line containing `expect`, nothing trained and --out not written.
function(expect_failure what expect np)
  execute_process(COMMAND ${mpirun} -np ${np} ${EMBER} ${common} --out ${WORK}/refused ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  check_failed_job("${what}" "${expect}" "${rc}" "${out}${err}")
  if(EXISTS ${WORK}/refused)
    message(FATAL_ERROR "${what}: --out was written")
  endif()
endfunction()
