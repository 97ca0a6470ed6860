# Finds ember's Debian-packaged dependencies; a missing one stops configure
# with the package to install (scripts/install_deps.sh installs them all).

macro(ember_require found what package)
  if(NOT ${found})
    message(FATAL_ERROR "ember: ${what} not found. Install it with: apt-get install -y ${package}  (or run scripts/install_deps.sh)")
  endif()
endmacro()

find_package(OpenMP QUIET COMPONENTS CXX)
ember_require(OpenMP_CXX_FOUND "OpenMP" "libgomp1 g++")

find_package(dnnl CONFIG QUIET)
ember_require(dnnl_FOUND "oneDNN (dnnl)" "libdnnl-dev")

find_package(HDF5 QUIET COMPONENTS C)
ember_require(HDF5_FOUND "HDF5 (C API)" "libhdf5-dev")

find_package(MPI QUIET COMPONENTS CXX C)
ember_require(MPI_FOUND "MPI" "libopenmpi-dev openmpi-bin")

find_package(CLI11 CONFIG QUIET)
ember_require(CLI11_FOUND "CLI11" "libcli11-dev")

find_package(nlohmann_json CONFIG QUIET)
ember_require(nlohmann_json_FOUND "nlohmann-json" "nlohmann-json3-dev")

# cpp-httplib (`ember serve`, `ember bench-serve`): Debian builds it as a library whose
# class layout follows the -D flags in its pkg-config file, so it is used through that.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
ember_require(HTTPLIB_FOUND "cpp-httplib" "libcpp-httplib-dev pkg-config")

# Unicode character data: the BPE pre-tokenizer's letter, number and space
# classes are generated from it at build time (data/tokenizer/tools/gen_unicode_classes.cpp).
find_file(EMBER_UNICODE_DATA UnicodeData.txt PATHS /usr/share/unicode NO_DEFAULT_PATH)
find_file(EMBER_UNICODE_PROPLIST PropList.txt PATHS /usr/share/unicode NO_DEFAULT_PATH)
ember_require(EMBER_UNICODE_DATA "Unicode character data (/usr/share/unicode/UnicodeData.txt)" "unicode-data")
ember_require(EMBER_UNICODE_PROPLIST "Unicode character data (/usr/share/unicode/PropList.txt)" "unicode-data")

if(EMBER_BUILD_TESTS)
  find_package(Catch2 CONFIG QUIET)
  ember_require(Catch2_FOUND "Catch2 (v2)" "catch2")
endif()
