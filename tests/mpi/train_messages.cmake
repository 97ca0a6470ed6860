# Failures of `mpirun -np 2 ember train` that every rank meets (or that one
# rank's own command line causes) end the job within 60 s with ONE plain
# message and the right exit code: a library error inside the ranks' agreement
# (OUT/data is a file) in the words of a single process, never "filesystem
# error"; a checkpoint whose /train state is not JSON, named; a usage error
# on one rank only (exit 2); ranks running different commands; a ZeRO-3 run that
# diverged (its streamed save refused, nothing written). And one that succeeds: a
# ZeRO-3 run's end-of-run sample over a vocabulary larger than its tokenizer's.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/tiny_run.cmake)
write_tiny_run(${WORK})
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)
set(common train --config ${WORK}/tiny.json --data ${WORK}/corpus.txt --batch-size 2 --seq-len 16 --steps 2
    --warmup 1 --log-every 100 --eval-batches 1)

# Runs the job; checks its exit code, that `expect` is in its output exactly
# once and that no raw library text is.
function(expect_job what code expect)
  execute_process(COMMAND ${mpirun} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  message("${what}: exit ${rc}\n${out}${err}")
  if(rc MATCHES "timeout|Process terminated")
    message(FATAL_ERROR "${what}: the job hung")
  endif()
  if(NOT rc EQUAL code)
    message(FATAL_ERROR "${what}: exit ${rc}, expected ${code}")
  endif()
  string(FIND "${out}${err}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: the output lacks \"${expect}\"")
  endif()
  string(REPLACE "${expect}" "" rest "${out}${err}")
  string(FIND "${rest}" "${expect}" again)
  if(NOT again EQUAL -1)
    message(FATAL_ERROR "${what}: \"${expect}\" printed more than once")
  endif()
  foreach(raw "filesystem error" "json.exception" "std::" "basic_string")
    string(FIND "${out}${err}" "${raw}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${what}: raw library text \"${raw}\" in the output")
    endif()
  endforeach()
endfunction()

# A std::filesystem error inside agreed(): the single process's plain sentence.
file(MAKE_DIRECTORY ${WORK}/file_data)
file(WRITE ${WORK}/file_data/data "not a folder")
expect_job("OUT/data is a file" 1 "ember: error: rank 0: ${WORK}/file_data/data: Not a directory while running `ember train`"
           -np 2 ${EMBER} ${common} --out ${WORK}/file_data)

# A checkpoint whose digest is fine but whose /train state is not JSON.
execute_process(COMMAND ${EMBER} ${common} --out ${WORK}/run RESULT_VARIABLE rc OUTPUT_QUIET)
execute_process(COMMAND ${TOOL} bad-state ${WORK}/run/step_00000002.h5 RESULT_VARIABLE rc_tool)
if(NOT rc EQUAL 0 OR NOT rc_tool EQUAL 0)
  message(FATAL_ERROR "preparing the run failed (${rc}, ${rc_tool})")
endif()
expect_job("corrupt /train state" 1
           "ember: error: rank 0: ${WORK}/run/step_00000002.h5: the training state (/train) is not ember's: "
           -np 2 ${EMBER} train --resume ${WORK}/run --steps 4)

# ZeRO-3 streams the parameters into the checkpoint a unit at a time: a diverged one stops
# every rank with one message, leaves no file (not even the temporary) and latest unmoved.
expect_job("--zero 3 diverged" 1 "is not finite (the run diverged); no checkpoint written"
           -np 2 ${EMBER} ${common} --out ${WORK}/diverged --zero 3 --steps 1 --warmup 0 --val-fraction 0
           --lr 1e300 --min-lr 0 --clip 0)
file(GLOB written ${WORK}/diverged/*.h5 ${WORK}/diverged/.*.tmp ${WORK}/diverged/latest)
if(written)
  message(FATAL_ERROR "--zero 3 diverged: left ${written}")
endif()

# The end-of-run sample of a ZeRO-3 run whose vocabulary (300) is larger than its byte
# tokenizer's: drawn from the ids the tokenizer decodes (exit 0), after the moments were
# freed for the gathered parameters.
file(WRITE ${WORK}/wide.json "{\"vocab_size\": 300, \"d_model\": 16, \"n_layers\": 1, \"n_heads\": 2, \"ffn_hidden\": 32, \"max_seq_len\": 32}")
expect_job("--zero 3 sample" 0 "--- sample ---"
           -np 2 ${EMBER} train --config ${WORK}/wide.json --data ${WORK}/corpus.txt --batch-size 2 --seq-len 16
           --steps 2 --warmup 1 --log-every 100 --eval-batches 1 --out ${WORK}/sample --zero 3 --sample-tokens 24)

# One rank's command line does not parse (an MPMD job): exit 2 with CLI11's message, no hang.
expect_job("usage error on rank 1" 2 "The following argument was not expected: --no-such-option"
           -np 1 ${EMBER} ${common} --out ${WORK}/mpmd : -np 1 ${EMBER} ${common} --out ${WORK}/mpmd --no-such-option)
expect_job("different commands" 1 "ranks disagree on the command (rank 0: ember train, rank 1: ember info)"
           -np 1 ${EMBER} ${common} --out ${WORK}/mpmd2 : -np 1 ${EMBER} info --config ${WORK}/tiny.json)
file(REMOVE_RECURSE ${WORK})
