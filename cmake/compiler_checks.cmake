# Checks that the compiler, with this build's flags, computes right; adds a workaround where
# a known miscompilation shows. Included after the architecture flags are set.
#
# GCC 12.2 with AVX-512 enabled builds some constant vectors wrong (probes/vector_constant.cpp):
# every -march=native build on an AVX-512 machine would carry silently wrong constants.
# Turning off the SLP vectorizer avoids it; Eigen's kernels are explicit SIMD and keep their speed.
#
# A build for another CPU than the host's (MPIDDP_NATIVE_ARCH other than native: CI's compile-only
# x86-64-v4 stage on an AVX2 host) cannot run the probe: it takes the workaround unasked.
if(MPIDDP_NATIVE AND NOT MPIDDP_NATIVE_ARCH STREQUAL "native")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-fno-tree-slp-vectorize)
    set(MPIDDP_COMPILER_WORKAROUND "-fno-tree-slp-vectorize" CACHE INTERNAL "")
  else()
    set(MPIDDP_COMPILER_WORKAROUND "" CACHE INTERNAL "")
  endif()
  return()
endif()
get_directory_property(_mpiddp_options COMPILE_OPTIONS)
separate_arguments(_mpiddp_probe_flags UNIX_COMMAND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_RELEASE}")
foreach(_option IN LISTS _mpiddp_options)
  if(NOT _option MATCHES "^\\$<")  # generator expressions are not flags try_run understands
    list(APPEND _mpiddp_probe_flags ${_option})
  endif()
endforeach()
try_run(_mpiddp_probe_run _mpiddp_probe_compiled ${CMAKE_BINARY_DIR}/probes
        ${CMAKE_CURRENT_LIST_DIR}/probes/vector_constant.cpp
        COMPILE_DEFINITIONS ${_mpiddp_probe_flags}
        CXX_STANDARD 20)
if(_mpiddp_probe_compiled AND NOT _mpiddp_probe_run EQUAL 0)
  message(STATUS "mpiddp: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} miscompiles "
                 "constant vectors with these flags (cmake/probes/vector_constant.cpp); "
                 "building with -fno-tree-slp-vectorize")
  try_run(_mpiddp_probe_run _mpiddp_probe_compiled ${CMAKE_BINARY_DIR}/probes
          ${CMAKE_CURRENT_LIST_DIR}/probes/vector_constant.cpp
          COMPILE_DEFINITIONS ${_mpiddp_probe_flags} -fno-tree-slp-vectorize
          CXX_STANDARD 20)
  if(NOT _mpiddp_probe_run EQUAL 0)
    message(FATAL_ERROR "mpiddp: the compiler miscompiles cmake/probes/vector_constant.cpp even "
                        "with -fno-tree-slp-vectorize; configure with -DMPIDDP_NATIVE=OFF or "
                        "another compiler")
  endif()
  add_compile_options(-fno-tree-slp-vectorize)
  set(MPIDDP_COMPILER_WORKAROUND "-fno-tree-slp-vectorize" CACHE INTERNAL "")
else()
  set(MPIDDP_COMPILER_WORKAROUND "" CACHE INTERNAL "")
endif()
