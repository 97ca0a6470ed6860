# What mpi_align_parity and mpi_reward_parity (align_parity.cmake, reward_parity.cmake) both
# check of a command on preference pairs, with `common` (its options), `mpirun`, EMBER, TOOL,
# WORK and `final` (the last checkpoint's name) set by the including script.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)

# One process at batch 4 and at batch 2 x grad-accum 2, two ranks at batch 2 (saving step 2),
# then their logged steps and final tensors compared: OUT folders WORK/<prefix>1, <prefix>1a2,
# <prefix>2; `what` names the trained tensors in the messages.
function(w2_equals_w1 name prefix what)
  run("${name} W=1 B=4" ${EMBER} ${common} ${ARGN} --batch-size 4 --out ${WORK}/${prefix}1)
  run("${name} W=1 B=2 A=2" ${EMBER} ${common} ${ARGN} --batch-size 2 --grad-accum 2
      --out ${WORK}/${prefix}1a2)
  run("${name} W=2 B=2" ${mpirun} -np 2 ${EMBER} ${common} ${ARGN} --batch-size 2 --save-every 2
      --check-every 1 --out ${WORK}/${prefix}2)
  run("${name} W=2 = W=1 B=4: steps" ${TOOL} metrics ${WORK}/${prefix}2 ${WORK}/${prefix}1)
  run("${name} W=2 = W=1 A=2: steps" ${TOOL} metrics ${WORK}/${prefix}2 ${WORK}/${prefix}1a2)
  run("${name} W=2 = W=1 B=4: ${what}" ${TOOL} compare ${WORK}/${prefix}2/${final}
      ${WORK}/${prefix}1/${final})
  run("${name} W=2 = W=1 A=2: ${what}" ${TOOL} compare ${WORK}/${prefix}2/${final}
      ${WORK}/${prefix}1a2/${final})
endfunction()

# The W = 2 run WORK/<prefix>2's step 2 (with the files named after it) resumed on one process
# with --batch-size 4 ends where the unbroken WORK/<prefix>1 run ended.
function(resume_w2_at_w1 command prefix)
  file(MAKE_DIRECTORY ${WORK}/resume)
  file(COPY ${WORK}/${prefix}2/step_00000002.h5 DESTINATION ${WORK}/resume)
  foreach(f ${ARGN})
    file(COPY ${WORK}/${prefix}2/${f} DESTINATION ${WORK}/resume)
  endforeach()
  file(WRITE ${WORK}/resume/latest "step_00000002.h5\n")
  run("resume at W=1" ${EMBER} ${command} --resume ${WORK}/resume --batch-size 4)
  run("resumed = unbroken" ${TOOL} compare ${WORK}/resume/${final} ${WORK}/${prefix}1/${final})
endfunction()

# A bad pair line fails every rank with its message, never a hang, and writes no --out.
function(bad_pair_line_fails command)
  file(WRITE ${WORK}/bad.jsonl "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n{not json\n")
  execute_process(COMMAND ${mpirun} -np 2 ${EMBER} ${command} --base ${WORK}/base.h5
                          --data ${WORK}/bad.jsonl --seq-len 32 --out ${WORK}/bad
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  check_failed_job("a bad pair line" "bad.jsonl line 2" "${rc}" "${out}${err}")
  if(EXISTS ${WORK}/bad)
    message(FATAL_ERROR "a bad pair line: --out was written")
  endif()
endfunction()
