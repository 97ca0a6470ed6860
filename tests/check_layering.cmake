# The include rules of docs/architecture.md, checked: which top folders each
# layer's files may include, and the one file allowed to include each heavy
# dependency. Run: cmake [-DROOT=<source folder>] -P tests/check_layering.cmake
# Fails naming every file, include and rule broken. tests/ and bench/ are not
# scanned: they may include a dependency to check ember against it.
cmake_minimum_required(VERSION 3.25)
get_filename_component(source_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
if(NOT DEFINED ROOT)
  set(ROOT "${source_root}")
endif()
get_filename_component(ROOT "${ROOT}" ABSOLUTE)

# --- 1. The folders a layer's files may include as "folder/..." ----------------------------------
# One way: core <- autograd <- nn, optim; data <- core; dist <- autograd, optim;
# apps (and the examples) use everything. ember/ is the umbrella header: the
# library without apps. The generated "ember/version.h" is allowed everywhere.
set(layers core autograd nn optim data dist apps ember examples)
set(may_include_core core)
set(may_include_autograd core autograd)
set(may_include_nn core autograd nn)
set(may_include_optim core autograd optim)
set(may_include_data core data)
set(may_include_dist core autograd optim dist)
set(may_include_apps core autograd nn optim data dist apps ember)
set(may_include_ember core autograd nn optim data dist ember)
set(may_include_examples core autograd nn optim data dist apps ember)
set(library_layers core autograd nn optim data dist)  # never include apps/
# Includes whose first folder is one of these are ember's own (<...> or "...").
set(tree_folders ${layers} tests bench tools scripts docs)

# --- 2. Each heavy dependency: what its includes look like, the files that may include it -------
set(dependencies CLI11 MPI oneDNN HDF5)
set(CLI11_include "^CLI/")
set(CLI11_only_in "^apps/cli/")
set(MPI_include "^mpi\\.h$")
set(MPI_only_in "^dist/communicator\\.cpp$")
set(oneDNN_include "dnnl")
set(oneDNN_only_in "^core/kernels/matmul\\.cpp$")
set(HDF5_include "^hdf5[^/]*\\.h$|^H5[^/]*\\.h$")
set(HDF5_only_in "^core/io/hdf5_file\\.cpp$")

# --- 3. Known exceptions: "<file>:<include prefix>" ---------------------------------------------
set(known_exceptions "")

# ------------------------------------------------------------------------------------------------
set(violations "")
set(used_exceptions "")
set(n_files 0)
set(n_includes 0)

# Appends "<file>: #include <what> breaks <rule>" unless a known exception covers it.
macro(report file name delimited rule)
  set(excused FALSE)
  foreach(e IN LISTS known_exceptions)
    string(FIND "${e}" ":" colon)
    string(SUBSTRING "${e}" 0 ${colon} e_file)
    math(EXPR from "${colon} + 1")
    string(SUBSTRING "${e}" ${from} -1 e_prefix)
    string(FIND "${name}" "${e_prefix}" at)
    if("${file}" STREQUAL "${e_file}" AND at EQUAL 0)
      set(excused TRUE)
      list(APPEND used_exceptions "${e}")
    endif()
  endforeach()
  if(NOT excused)
    string(APPEND violations "  ${file}: #include ${delimited} breaks \"${rule}\"\n")
  endif()
endmacro()

# The folder rule for one include `name` of `file` in layer `layer`.
function(check_folder file layer name delimited)
  string(REGEX MATCH "^[^/]+/" first "${name}")
  string(REGEX REPLACE "/$" "" first "${first}")
  if(first STREQUAL "" OR NOT first IN_LIST tree_folders OR name STREQUAL "ember/version.h")
    return()
  endif()
  if(first IN_LIST may_include_${layer})
    return()
  endif()
  if(first STREQUAL "apps" AND layer IN_LIST library_layers)
    list(JOIN library_layers "/ " below)
    set(rule "nothing under ${below}/ includes apps/ (apps uses the library, never the reverse)")
  else()
    list(JOIN may_include_${layer} "/ " allowed)
    set(rule "${layer}/ may include only ${allowed}/")
  endif()
  report("${file}" "${name}" "${delimited}" "${rule}")
  set(violations "${violations}" PARENT_SCOPE)
  set(used_exceptions "${used_exceptions}" PARENT_SCOPE)
endfunction()

# The heavy-dependency rules for one include.
function(check_dependencies file name delimited)
  foreach(dep IN LISTS dependencies)
    if(NOT name MATCHES "${${dep}_include}")
      continue()
    endif()
    set(allowed FALSE)
    foreach(where IN LISTS ${dep}_only_in)
      if(file MATCHES "${where}")
        set(allowed TRUE)
      endif()
    endforeach()
    if(NOT allowed)
      list(GET ${dep}_only_in 0 home)
      string(REGEX REPLACE "[\\^$\\\\]" "" home "${home}")
      report("${file}" "${name}" "${delimited}" "${dep} is included only in ${home}")
    endif()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
  set(used_exceptions "${used_exceptions}" PARENT_SCOPE)
endfunction()

foreach(layer IN LISTS layers)
  file(GLOB_RECURSE sources RELATIVE "${ROOT}"
       "${ROOT}/${layer}/*.h" "${ROOT}/${layer}/*.hpp" "${ROOT}/${layer}/*.cpp" "${ROOT}/${layer}/*.cc"
       "${ROOT}/${layer}/*.inc" "${ROOT}/${layer}/*.in")
  list(SORT sources)
  foreach(file IN LISTS sources)
    math(EXPR n_files "${n_files} + 1")
    file(STRINGS "${ROOT}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS lines)
      string(REGEX MATCH "[<\"][^>\"]*[>\"]" delimited "${line}")
      string(REGEX REPLACE "^.(.*).$" "\\1" name "${delimited}")
      math(EXPR n_includes "${n_includes} + 1")
      check_folder("${file}" "${layer}" "${name}" "${delimited}")
      check_dependencies("${file}" "${name}" "${delimited}")
    endforeach()
  endforeach()
endforeach()

if(n_files EQUAL 0)
  message(FATAL_ERROR "layering: no source files under ${ROOT} (is ROOT the source folder?)")
endif()
foreach(e IN LISTS known_exceptions)
  if(e IN_LIST used_exceptions)
    message(STATUS "layering: known exception ${e} (listed in tests/check_layering.cmake)")
  elseif(ROOT STREQUAL source_root)
    message(STATUS "layering: known exception ${e} no longer needed: delete it from tests/check_layering.cmake")
  endif()
endforeach()
if(violations)
  string(REGEX MATCHALL "\n" count "${violations}")
  list(LENGTH count count)
  message(FATAL_ERROR "layering: ${count} include(s) break the rules (tests/check_layering.cmake, "
                      "docs/architecture.md):\n${violations}")
endif()
message(STATUS "layering: ${n_includes} includes in ${n_files} files under ${ROOT}, all within the rules")
