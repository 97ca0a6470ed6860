# Proves tests/check_layering.cmake can fail: runs it on the fixture tree
# tests/fixtures/layering_fixture/ (one violation of each kind beside allowed
# includes) and expects a failure naming exactly these six files, includes
# and rules. Run: cmake -P tests/check_layering_catches.cmake
cmake_minimum_required(VERSION 3.25)
set(fixture "${CMAKE_CURRENT_LIST_DIR}/fixtures/layering_fixture")
execute_process(COMMAND "${CMAKE_COMMAND}" -DROOT=${fixture} -P "${CMAKE_CURRENT_LIST_DIR}/check_layering.cmake"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(out "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "check_layering.cmake passed a tree with six bad includes:\n${out}")
endif()

set(expected
    "nn/module.h: #include \"apps/train/trainer.h\" breaks \"nothing under core/ autograd/ nn/ inference/ optim/ data/ dist/ includes apps/"
    "data/loader.cpp: #include \"nn/module.h\" breaks \"data/ may include only core/ data/\""
    "optim/adamw.cpp: #include <mpi.h> breaks \"MPI is included only in dist/communicator.cpp\""
    "apps/train/loop.cpp: #include <CLI/CLI.hpp> breaks \"CLI11 is included only in apps/cli/\""
    "nn/transformer.h: #include \"inference/generate.h\" breaks \"nn/ may include only core/ autograd/ nn/\""
    "apps/common/model_io.cpp: #include \"apps/train/run.h\" breaks \"apps/common/ may include only apps/common/\""
    "layering: 6 include(s) break the rules")
foreach(line IN LISTS expected)
  string(FIND "${out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_layering.cmake's report lacks\n  ${line}\nIt said:\n${out}")
  endif()
endforeach()
message(STATUS "check_layering.cmake refused the fixture with the six expected violations")
