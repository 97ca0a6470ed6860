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
