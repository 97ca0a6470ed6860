# `cmake --install build --prefix P`: the headers under P/include/ember with
# the source tree's folder layout but apps/cli/ (the command line, the one
# CLI11 user) (so "core/tensor.h", "nn/transformer.h" and
# the generated "ember/version.h" work as inside the project), the static
# libraries, the `ember` program and the CMake package that
# find_package(ember) loads (P/lib/cmake/ember). examples/ is a project built
# against it; tests/install/check_install.sh checks the whole path.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ember_libraries ember_core ember_autograd ember_data ember_nn ember_inference ember_optim ember_dist ember_apps)
set(ember_include_dir ${CMAKE_INSTALL_INCLUDEDIR}/ember)
set(ember_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ember)

# Consumers compile the headers as C++20; inside the tree the directory-wide
# include path serves, installed targets carry P/include/ember instead.
target_compile_features(ember_core PUBLIC cxx_std_20)
foreach(lib ${ember_libraries})
  string(REPLACE "ember_" "" short ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short})
  target_include_directories(${lib} INTERFACE $<INSTALL_INTERFACE:${ember_include_dir}>)
endforeach()

# ember::ember: everything, for target_link_libraries(app PRIVATE ember::ember).
add_library(ember_all INTERFACE)
target_link_libraries(ember_all INTERFACE ${ember_libraries})
set_target_properties(ember_all PROPERTIES EXPORT_NAME ember)
add_library(ember::ember ALIAS ember_all)
set_target_properties(ember PROPERTIES EXPORT_NAME cli)

install(TARGETS ${ember_libraries} ember_all EXPORT emberTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ember EXPORT emberTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

foreach(dir ember core autograd data nn inference optim dist apps)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${ember_include_dir}/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "tools" EXCLUDE PATTERN "cli" EXCLUDE
          PATTERN "serve" EXCLUDE PATTERN "serve_bench" EXCLUDE)
endforeach()
install(FILES ${EMBER_GENERATED_INCLUDE_DIR}/ember/version.h DESTINATION ${ember_include_dir}/ember)

install(EXPORT emberTargets NAMESPACE ember:: DESTINATION ${ember_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/emberConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/emberConfig.cmake INSTALL_DESTINATION ${ember_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/emberConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/emberConfig.cmake ${PROJECT_BINARY_DIR}/emberConfigVersion.cmake
        DESTINATION ${ember_cmake_dir})
