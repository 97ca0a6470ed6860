# The build-time cap of EMBER_TARGET_CLONES, read from the symbols of the
# linked programs (GCC names a clone FUNCTION.avx512f, FUNCTION.avx2 or
# FUNCTION.default): the usual `ember` holds all three kinds, the avx2
# variant's the same AVX2 and baseline ones and none for AVX-512, the generic
# variant's no clones at all; likewise the capped test programs.
# Run as: cmake -DNM=nm -DFULL=ember -DAVX2=isa_avx2_ember -DGENERIC=isa_generic_ember
#               -DAVX2_TESTS=isa_avx2_tests -DGENERIC_TESTS=isa_generic_tests -P check_clones.cmake

# Sets <prefix>_avx512f, <prefix>_avx2 and <prefix>_default to the number of such clones in binary.
function(count_clones prefix binary)
  execute_process(COMMAND ${NM} ${binary} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${binary} failed (${rc})")
  endif()
  foreach(kind avx512f avx2 default)
    string(REGEX MATCHALL "\\.${kind}\n" hits "${symbols}")
    list(LENGTH hits n)
    set(${prefix}_${kind} ${n} PARENT_SCOPE)
    message("${binary}: ${n} .${kind} clones")
  endforeach()
endfunction()

count_clones(full ${FULL})
count_clones(avx2 ${AVX2})
count_clones(generic ${GENERIC})
if(full_avx512f EQUAL 0 OR full_avx2 EQUAL 0 OR full_default EQUAL 0)
  message(FATAL_ERROR "${FULL}: expected AVX-512, AVX2 and baseline clones")
endif()
if(NOT avx2_avx512f EQUAL 0 OR NOT avx2_avx2 EQUAL full_avx2 OR NOT avx2_default EQUAL full_default)
  message(FATAL_ERROR "${AVX2}: expected the ${full_avx2} AVX2 and ${full_default} baseline clones of ${FULL} "
                      "and no AVX-512 ones (a source with clones added since cmake last ran? re-run it)")
endif()
if(NOT generic_avx512f EQUAL 0 OR NOT generic_avx2 EQUAL 0 OR NOT generic_default EQUAL 0)
  message(FATAL_ERROR "${GENERIC}: expected no clones (baseline code only)")
endif()
count_clones(avx2_tests ${AVX2_TESTS})
count_clones(generic_tests ${GENERIC_TESTS})
if(NOT avx2_tests_avx512f EQUAL 0 OR avx2_tests_avx2 EQUAL 0)
  message(FATAL_ERROR "${AVX2_TESTS}: expected AVX2 clones and no AVX-512 ones")
endif()
if(NOT generic_tests_avx512f EQUAL 0 OR NOT generic_tests_avx2 EQUAL 0 OR NOT generic_tests_default EQUAL 0)
  message(FATAL_ERROR "${GENERIC_TESTS}: expected no clones (baseline code only)")
endif()
