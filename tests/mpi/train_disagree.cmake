# Ranks of one `mpirun ember train` given different settings (MPMD: rank 0's
# command line, then rank 1's) must all stop at start with ONE message naming
# what differs, exit non-zero, and never hang: --steps, --seq-len, --seed,
# --zero, --save-every, another --config, and a --data file of the same name
# and size but other content (each rank in its own working folder, as on two
# nodes with a local copy each); the same content there trains.
# Variables: EMBER, TOOL, MPIRUN, WORK.
include(${CMAKE_CURRENT_LIST_DIR}/failed_job.cmake)
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${TOOL} data ${WORK}/a RESULT_VARIABLE rc)
execute_process(COMMAND ${TOOL} data ${WORK}/b 8 RESULT_VARIABLE rc_b)  # same size, other tokens
if(NOT rc EQUAL 0 OR NOT rc_b EQUAL 0)
  message(FATAL_ERROR "train_parity_tool data failed")
endif()
file(WRITE ${WORK}/deeper.json "{\"vocab_size\": 64, \"d_model\": 16, \"n_layers\": 3, \"n_heads\": 2, \"ffn_hidden\": 32, \"max_seq_len\": 32}")
set(common train --config ${WORK}/a/tiny.json --data ${WORK}/a/train.bin --batch-size 2 --seq-len 16 --steps 4
    --warmup 1 --log-every 100 --out ${WORK}/run)

# rank0_args and rank1_args are ;-lists appended to `common` (or replacing it with FULL).
function(expect_disagreement what expect)
  cmake_parse_arguments(A "" "" "RANK0;RANK1;WDIR0;WDIR1" ${ARGN})
  set(w0 "")
  set(w1 "")
  if(A_WDIR0)
    set(w0 -wdir ${A_WDIR0})
    set(w1 -wdir ${A_WDIR1})
  endif()
  execute_process(
    COMMAND ${MPIRUN} --oversubscribe --bind-to none -np 1 ${w0} ${EMBER} ${A_RANK0} : -np 1 ${w1} ${EMBER} ${A_RANK1}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  check_failed_job("${what}" "${expect}" "${rc}" "${out}${err}")
  string(REGEX MATCHALL "ranks disagree" lines "${out}${err}")
  list(LENGTH lines n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "${what}: expected the message once, got ${n} times")
  endif()
endfunction()

expect_disagreement("--steps" "ranks disagree on --steps (rank 0: 4, rank 1: 50)"
                    RANK0 ${common} RANK1 ${common} --steps 50)
expect_disagreement("--seq-len" "ranks disagree on --seq-len (rank 0: 16, rank 1: 8)"
                    RANK0 ${common} RANK1 ${common} --seq-len 8)
expect_disagreement("--seed" "ranks disagree on --seed (rank 0: 1337, rank 1: 5)"
                    RANK0 ${common} RANK1 ${common} --seed 5)
expect_disagreement("--zero" "ranks disagree on --zero (rank 0: 1, rank 1: 0)"
                    RANK0 ${common} --zero 1 RANK1 ${common})
expect_disagreement("--save-every" "ranks disagree on --save-every (rank 0: 0, rank 1: 2)"
                    RANK0 ${common} RANK1 ${common} --save-every 2)
expect_disagreement("--config" "ranks disagree on --config"
                    RANK0 ${common} RANK1 ${common} --config ${WORK}/deeper.json)
# The same --data path on both ranks, other bytes behind it.
set(relative train --config ${WORK}/a/tiny.json --data train.bin --batch-size 2 --seq-len 16 --steps 4
    --warmup 1 --log-every 100 --out ${WORK}/run)
expect_disagreement("data content" "ranks disagree on the data files"
                    RANK0 ${relative} RANK1 ${relative} WDIR0 ${WORK}/a WDIR1 ${WORK}/b)
# The same --data path and bytes at another absolute path on each rank (a local copy per node, under
# another working folder): the ranks agree and train, though the run stores rank 0's absolute path.
file(COPY ${WORK}/a/train.bin DESTINATION ${WORK}/c)
execute_process(
  COMMAND ${MPIRUN} --oversubscribe --bind-to none -np 1 -wdir ${WORK}/a ${EMBER} ${relative}
          : -np 1 -wdir ${WORK}/c ${EMBER} ${relative}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(NOT rc EQUAL 0 OR NOT EXISTS ${WORK}/run/step_00000004.h5)
  message(FATAL_ERROR "local copies at other paths: the run failed (${rc}):\n${out}${err}")
endif()
file(REMOVE_RECURSE ${WORK})
