# check_failed_job(what expect rc output): an MPI job that must fail, checked
# once for every script: it did not hang, did not exit 0, and said `expect`.
# run(what COMMAND...): a command that must succeed within 120 s (its output is shown).
function(check_failed_job what expect rc output)
  message("${what}: exit ${rc}\n${output}")
  if(rc MATCHES "timeout|Process terminated")
    message(FATAL_ERROR "${what}: the job hung")
  endif()
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what}: the job exited with 0")
  endif()
  string(FIND "${output}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: the output lacks \"${expect}\"")
  endif()
endfunction()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})\n--- stdout\n${out}--- stderr\n${err}")
  endif()
  message("${what}: ok\n${out}")
endfunction()
