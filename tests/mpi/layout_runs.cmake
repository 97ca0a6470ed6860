# What the tensor- and pipeline-parallel training scripts (train_parity_tp.cmake,
# train_parity_pp.cmake) share, over their variables EMBER, WORK, `mpirun` and `common` (the
# train command line of their runs); needs failed_job.cmake.
# resume_layout(name source-run np [layout options...]): step 5 of source-run copied into
# WORK/name and resumed on np ranks with the layout options.
function(resume_layout name source np)
  file(MAKE_DIRECTORY ${WORK}/${name})
  file(COPY ${WORK}/${source}/step_00000005.h5 DESTINATION ${WORK}/${name})
  file(WRITE ${WORK}/${name}/latest "step_00000005.h5\n")
  run("resume ${name}" ${mpirun} -np ${np} ${EMBER} train --resume ${WORK}/${name} ${ARGN})
endfunction()

# expect_failure(what expect np [options...]): the run of `common` with the options on np ranks
# is refused up front with one line containing `expect`, nothing trained.
function(expect_failure what expect np)
  execute_process(COMMAND ${mpirun} -np ${np} ${EMBER} ${common} --out ${WORK}/refused ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  check_failed_job("${what}" "${expect}" "${rc}" "${out}${err}")
endfunction()
