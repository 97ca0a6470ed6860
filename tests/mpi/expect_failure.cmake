# Runs `mpirun -np NP CHILD MODE` and passes when the job ends within 60 s,
# with a non-zero exit code and EXPECT in its output: a failing rank must end
# every rank with its message, never hang (check_failed_job, failed_job.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
execute_process(
  COMMAND ${MPIRUN} --oversubscribe --bind-to none -np ${NP} ${CHILD} ${MODE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
check_failed_job("mpi_fault ${MODE}" "${EXPECT}" "${rc}" "--- stdout\n${out}--- stderr\n${err}")
