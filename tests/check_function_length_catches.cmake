# Proves tests/check_function_length.py can fail: runs it on the fixture tree
# tests/fixtures/function_length_fixture/ (a function of 81 lines and one of 80, both with braces
# in comments, strings and a raw string, and a marked table of 90) and expects a failure naming
# the 81-line function alone and listing the table's exemption.
# Run: cmake [-DPYTHON=python3] -P tests/check_function_length_catches.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED PYTHON)
  set(PYTHON python3)
endif()
set(fixture "${CMAKE_CURRENT_LIST_DIR}/fixtures/function_length_fixture")
execute_process(COMMAND "${PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/check_function_length.py"
                        --root "${fixture}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(out "${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "check_function_length.py did not fail (exit 1) on a tree with an "
                      "81-line function (exit ${rc}):\n${out}")
endif()

set(expected
    "core/counter.cpp:96: eighty_one_lines has 81 lines"
    "function_length: 1 function(s) longer than 80 lines"
    "exempt as a table (function-length: table): apps/presets.h:13 presets (90 lines)")
foreach(line IN LISTS expected)
  string(FIND "${out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_function_length.py's report lacks\n  ${line}\nIt said:\n${out}")
  endif()
endforeach()
string(FIND "${out}" "eighty_lines has" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "check_function_length.py reported Counter::eighty_lines, which has "
                      "80 lines:\n${out}")
endif()
message(STATUS "check_function_length.py refused the fixture's 81-line function alone")
