# Precompiled headers: the heavy header-only dependencies (Catch2, nlohmann json, CLI11) and
# the standard headers, parsed once per group of targets instead of once per source file
# (tests/CMakeLists.txt, apps/CMakeLists.txt). Only headers from outside the tree: a change
# to one of ember's headers never rebuilds a precompiled header.

# The standard headers most of ember's sources include.
set(ember_pch_std_headers <algorithm> <array> <atomic> <cmath> <cstdint> <cstring> <filesystem>
    <fstream> <functional> <map> <memory> <optional> <span> <sstream> <string> <string_view>
    <vector>)

# ccache caches a compile that uses (or builds) a precompiled header only with these
# sloppiness settings (its manual, "Precompiled headers"); the header is also written just
# before its users compile, hence include_file_mtime / ctime. Set for the targets that use one,
# only when the compiler launcher is ccache.
set(ember_pch_ccache_sloppiness pch_defines,time_macros,include_file_mtime,include_file_ctime)
function(ember_pch_launcher target)
  if(CMAKE_CXX_COMPILER_LAUNCHER MATCHES "(^|[/;])ccache$")
    set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER
        "${CMAKE_COMMAND};-E;env;CCACHE_SLOPPINESS=${ember_pch_ccache_sloppiness};${CMAKE_CXX_COMPILER_LAUNCHER}")
  endif()
endfunction()
