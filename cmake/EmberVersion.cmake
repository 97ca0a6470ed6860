# Generates ember/version.h (EMBER_VERSION from project(), EMBER_BUILD_INFO)
# into the build tree; every target sees it as "ember/version.h" and it is
# installed with the other headers.
set(EMBER_BUILD_INFO "${CMAKE_BUILD_TYPE}")
if(NOT EMBER_BUILD_INFO)
  set(EMBER_BUILD_INFO "no build type")
endif()
string(APPEND EMBER_BUILD_INFO ", ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, C++${CMAKE_CXX_STANDARD}")
string(APPEND EMBER_BUILD_INFO ", oneDNN ${dnnl_VERSION}, HDF5 ${HDF5_VERSION}, MPI ${MPI_CXX_VERSION}")
string(APPEND EMBER_BUILD_INFO ", OpenMP ${OpenMP_CXX_VERSION}")

set(EMBER_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/generated)
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in ${EMBER_GENERATED_INCLUDE_DIR}/ember/version.h @ONLY)
include_directories(${EMBER_GENERATED_INCLUDE_DIR})
