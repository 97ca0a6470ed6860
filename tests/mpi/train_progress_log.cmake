# `mpirun -np 2 ember train ... > log`: Open MPI gives every rank a pseudo-terminal even
# though mpirun's own output goes to a file, so the progress bar (carriage returns, escape
# codes) must stay out unless asked for: the log holds plain lines only. With
# EMBER_PROGRESS=bar the bar is there, which shows the ranks did see a terminal (the first
# check can fail). Variables: EMBER, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/tiny_run.cmake)
write_tiny_run(${WORK})
set(ENV{TERM} xterm)  # a terminal's TERM, whatever the test's environment has
string(ASCII 27 escape)

# Runs `mpirun -np 2 ember train` into WORK/<name>.log; returns the log's text.
function(train_into_log name out_var)
  execute_process(COMMAND ${MPIRUN} --oversubscribe --bind-to none -np 2 ${EMBER} train --config ${WORK}/tiny.json
                          --data ${WORK}/corpus.txt --batch-size 2 --seq-len 16 --steps 3 --log-every 1
                          --eval-batches 1 --out ${WORK}/${name}
                  OUTPUT_FILE ${WORK}/${name}.log ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 120)
  file(READ ${WORK}/${name}.log log)
  message("${name}: exit ${rc}\n${log}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: mpirun ember train failed (${rc})")
  endif()
  if(NOT log MATCHES "step +3/3 \\| loss ")
    message(FATAL_ERROR "${name}: the log lacks the last step's line")
  endif()
  set(${out_var} "${log}" PARENT_SCOPE)
endfunction()

unset(ENV{EMBER_PROGRESS})
train_into_log(plain log)
string(FIND "${log}" "\r" cr)
string(FIND "${log}" "${escape}" esc)
if(NOT cr EQUAL -1 OR NOT esc EQUAL -1)
  message(FATAL_ERROR "plain: the log of mpirun's redirected output holds a carriage return or an escape byte")
endif()

set(ENV{EMBER_PROGRESS} bar)
train_into_log(bar log)
string(FIND "${log}" "\r[" cr)
string(FIND "${log}" "${escape}[K" esc)
if(cr EQUAL -1 OR esc EQUAL -1)
  message(FATAL_ERROR "bar: EMBER_PROGRESS=bar under mpirun drew no bar (did the ranks get a terminal?)")
endif()
file(REMOVE_RECURSE ${WORK})
