# Runs `mpirun -np NP CHILD MODE` and passes when the job ends within 60 s,
# with a non-zero exit code and EXPECT in its output: a failing rank must end
# every rank with its message, never hang.
execute_process(
  COMMAND ${MPIRUN} --oversubscribe --bind-to none -np ${NP} ${CHILD} ${MODE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message("exit: ${rc}\n--- stdout\n${out}--- stderr\n${err}")
if(rc MATCHES "timeout|Process terminated")
  message(FATAL_ERROR "the job hung (${rc})")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited with 0; a failing rank must make it fail")
endif()
string(FIND "${out}${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the output lacks the failing rank's message \"${EXPECT}\"")
endif()
