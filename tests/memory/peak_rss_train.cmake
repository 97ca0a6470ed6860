# `ember info --world-size W --zero K` against the peak RSS of each rank of the
# `ember train` run it describes: a 20.6M-parameter model (16P = 314 MiB, so the
# model dominates the process's own ~40-50 MiB), 2 steps of B 4 x T 64, at
# W = 1 and W = 2 (mpirun) for K = 0, 1, 2, 3, and once with --checkpoint-activations; and
# each rank of `--pp 2` at B 16 in 8 micro-batches under 1f1b and gpipe, of `--tp 2` and of
# `--tp 2 --pp 2` (B 4), and of data parallelism over shards ((T, P, D) = (2, 1, 2) and (1, 2, 2)
# with --zero 1), against its stage in info's per-stage table (`ember info --tp --pp ...`).
# Every rank's ru_maxrss (tests/memory/peak_rss.cpp) must be within 10% of info's
# total. Variables: EMBER, PEAK, MPIRUN, WORK, DATA.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(config ${WORK}/model.json)
file(WRITE ${config} [=[
{"vocab_size": 256, "d_model": 512, "n_layers": 6, "n_heads": 8, "ffn_hidden": 1536, "max_seq_len": 64}
]=])
set(shape --batch-size 4 --seq-len 64)
set(mpirun ${MPIRUN} --oversubscribe --bind-to none)
set(failures "")
set(table "")

# fixed(OUT value scale): value / scale with one decimal per factor of 10 in scale ("-3.1").
function(fixed out value scale)
  set(sign "")
  if(value LESS 0)
    set(sign "-")
    math(EXPR value "-(${value})")
  endif()
  math(EXPR whole "${value} / ${scale}")
  math(EXPR part "${value} % ${scale} + ${scale}")  # a leading 1 keeps the zeros
  string(SUBSTRING "${part}" 1 -1 part)
  set(${out} "${sign}${whole}.${part}" PARENT_SCOPE)
endfunction()

# check_rank(label predicted rss-file): one rank's peak RSS (KiB, from peak_rss) against info's
# predicted MiB; a row of the table, and the label among the failures beyond 10%.
function(check_rank label predicted rss)
  file(STRINGS ${rss} kib)
  # |predicted - measured| <= 10% of measured, in hundredths of a MiB.
  string(REPLACE "." "" p100 "${predicted}0")  # 123.4 MiB -> 12340 hundredths
  math(EXPR m100 "${kib} * 100 / 1024")
  math(EXPR pct10 "(${p100} - ${m100}) * 1000 / ${m100}")  # tenths of a percent
  fixed(measured ${m100} 100)
  fixed(error ${pct10} 10)
  set(table "${table}${label}: predicted ${predicted} MiB, measured ${measured} MiB, error ${error} %\n" PARENT_SCOPE)
  if(pct10 GREATER 100 OR pct10 LESS -100)
    set(failures "${failures}${label}; " PARENT_SCOPE)
  endif()
endfunction()

# run_case(W K [extra flags...]): train, measure every rank, compare with info.
function(run_case w k)
  set(name "W${w}_zero${k}")
  if(ARGN)
    set(name "${name}_ckpt")
  endif()
  set(out ${WORK}/${name})
  set(train ${EMBER} train --config ${config} --data ${DATA} --out ${out} --steps 2 ${shape}
      --eval-batches 0 --log-every 0 --zero ${k} ${ARGN})
  if(w EQUAL 1)
    set(launch ${PEAK} ${out}.rss -- ${train})
  else()
    set(launch ${mpirun} -np ${w} ${PEAK} ${out}.rss -- ${train})
  endif()
  execute_process(COMMAND ${launch} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: ember train failed (${rc})\n${o}\n${e}")
  endif()
  file(REMOVE_RECURSE ${out})  # the checkpoint: 240 MB
  execute_process(COMMAND ${EMBER} info --config ${config} ${shape} --world-size ${w} --zero ${k} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE info ERROR_VARIABLE e)
  if(NOT rc EQUAL 0 OR NOT info MATCHES "\n  total +([0-9.]+) MiB")
    message(FATAL_ERROR "${name}: ember info failed (${rc})\n${info}\n${e}")
  endif()
  set(predicted ${CMAKE_MATCH_1})
  math(EXPR last "${w} - 1")
  foreach(rank RANGE ${last})
    check_rank("${name} rank ${rank}" ${predicted} ${out}.rss.${rank})
  endforeach()
  set(table "${table}" PARENT_SCOPE)
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

# run_layout(name np P [train and info options...]): `ember train` of a tensor- and pipeline-
# parallel layout on np ranks of P stages (rank r runs stage r div (np / P)), each rank's peak RSS
# against the column of its stage in `ember info`'s per-stage table.
function(run_layout name np stages)
  set(out ${WORK}/${name})
  execute_process(COMMAND ${mpirun} -np ${np} ${PEAK} ${out}.rss -- ${EMBER} train --config ${config} --data ${DATA}
                          --out ${out} --steps 2 --seq-len 64 --eval-batches 0 --log-every 0 ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: ember train failed (${rc})\n${o}\n${e}")
  endif()
  file(REMOVE_RECURSE ${out})
  execute_process(COMMAND ${EMBER} info --config ${config} --seq-len 64 --world-size ${np} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE info ERROR_VARIABLE e)
  if(NOT rc EQUAL 0 OR NOT info MATCHES "\n  total +([0-9. ]+)\n")
    message(FATAL_ERROR "${name}: ember info failed (${rc})\n${info}\n${e}")
  endif()
  string(REGEX MATCHALL "[0-9.]+" totals "${CMAKE_MATCH_1}")
  math(EXPR last "${np} - 1")
  foreach(rank RANGE ${last})
    math(EXPR stage "${rank} * ${stages} / ${np}")
    list(GET totals ${stage} predicted)
    check_rank("${name} rank ${rank} (stage ${stage})" ${predicted} ${out}.rss.${rank})
  endforeach()
  set(table "${table}" PARENT_SCOPE)
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

foreach(w 1 2)
  foreach(k 0 1 2 3)
    run_case(${w} ${k})
  endforeach()
endforeach()
run_case(2 0 --checkpoint-activations)
# 8 micro-batches of 2 rows: 1F1B holds 2 on stage 0 and 1 on stage 1, GPipe 8 on both.
run_layout(pp2_1f1b 2 2 --pp 2 --batch-size 16 --micro-batches 8)
run_layout(pp2_gpipe 2 2 --pp 2 --batch-size 16 --micro-batches 8 --pp-schedule gpipe)
run_layout(tp2 2 1 --tp 2 --batch-size 4)
run_layout(tp2_recompute 2 1 --tp 2 --batch-size 8 --checkpoint-activations)
run_layout(tp2_pp2 4 2 --tp 2 --pp 2 --batch-size 4)
# Data parallelism over the shards: (T, P, D) = (2, 1, 2) and (1, 2, 2).
run_layout(tp2_dp2 4 1 --tp 2 --batch-size 4)
run_layout(pp2_dp2_zero1 4 2 --pp 2 --batch-size 4 --zero 1)
message("${table}")
if(failures)
  message(FATAL_ERROR "beyond 10% of the measured peak RSS: ${failures}")
endif()
