# Proves tests/check_citations.cmake can fail: runs it on the fixture tree
# tests/fixtures/citations_fixture/ (one citation of each bad kind beside good ones)
# and expects a failure naming exactly these six. Run: cmake -P tests/check_citations_catches.cmake
cmake_minimum_required(VERSION 3.25)
set(fixture "${CMAKE_CURRENT_LIST_DIR}/fixtures/citations_fixture")
execute_process(COMMAND "${CMAKE_COMMAND}" -DROOT=${fixture} -P "${CMAKE_CURRENT_LIST_DIR}/check_citations.cmake"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(out "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "check_citations.cmake passed a tree with six bad citations:\n${out}")
endif()

set(expected
    "src/model.h: cites the contract kept outside the repository (cite docs/*.md): // The model of SPEC.md section 2"
    "scripts/run.py: cites an issue number (state the reason itself): # The limits of issue 14"
    "scripts/run.py: cites /work/shared/DESIGN.md, which is not in the repository"
    "src/model.cpp: cites docs/missing.md, which is not in the repository"
    "src/model.cpp: docs/guide.md#not-a-heading-inside-a-code-fence names no heading of docs/guide.md"
    "docs/guide.md: docs/guide.md#no-such-heading names no heading of docs/guide.md"
    "citations: 6 citation(s) a reader of the repository cannot follow")
foreach(line IN LISTS expected)
  string(FIND "${out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_citations.cmake's report lacks\n  ${line}\nIt said:\n${out}")
  endif()
endforeach()
message(STATUS "check_citations.cmake refused the fixture with the six expected citations")
