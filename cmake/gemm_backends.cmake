# The matrix-product libraries built into mpiddp_core beside Eigen (kernels/gemm.hpp): OpenBLAS,
# BLIS and oneDNN, each from its Debian package (scripts/install-deps.sh installs them).
# MPIDDP_GEMM: "auto" builds in every one found, "none" Eigen only, or a ;-list of the ones
# required (openblas;blis;onednn), which fails when one is missing. Which one computes is
# decided at run time (compute.gemm), by measurement with `auto`.
set(MPIDDP_GEMM "auto" CACHE STRING "Matrix-product libraries beside Eigen: auto, none, or a list of openblas;blis;onednn")

set(_mpiddp_gemm_wanted openblas blis onednn)
set(_mpiddp_gemm_required "")
if(MPIDDP_GEMM STREQUAL "none")
  set(_mpiddp_gemm_wanted "")
elseif(NOT MPIDDP_GEMM STREQUAL "auto")
  set(_mpiddp_gemm_wanted ${MPIDDP_GEMM})
  set(_mpiddp_gemm_required ${MPIDDP_GEMM})
  foreach(lib IN LISTS _mpiddp_gemm_wanted)
    if(NOT lib MATCHES "^(openblas|blis|onednn)$")
      message(FATAL_ERROR "MPIDDP_GEMM: '${lib}' is not one of openblas, blis, onednn (or auto, none)")
    endif()
  endforeach()
endif()

set(MPIDDP_GEMM_FOUND "")

# Builds src/kernels/gemm_backends/NAME_gemm.cpp into mpiddp_core with the library's header
# directory (for that file only: BLIS and OpenBLAS both ship a cblas.h) and links LIBRARY.
function(mpiddp_add_gemm_backend name define include_dir library)
  set(source ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/gemm_backends/${name}_gemm.cpp)
  target_sources(mpiddp_core PRIVATE ${source})
  # -I/usr/include would break the C++ headers' #include_next <stdlib.h>.
  if(NOT include_dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    set_source_files_properties(${source} PROPERTIES INCLUDE_DIRECTORIES "${include_dir}")
  endif()
  target_link_libraries(mpiddp_core PRIVATE ${library})
  target_compile_definitions(mpiddp_core PRIVATE ${define})
  set(MPIDDP_GEMM_FOUND ${MPIDDP_GEMM_FOUND} ${name} PARENT_SCOPE)
endfunction()

# In this order: BLIS exports cblas_* too, and the first library linked answers them.
if("openblas" IN_LIST _mpiddp_gemm_wanted)
  find_package(OpenBLAS CONFIG QUIET)
  if(OpenBLAS_FOUND)
    mpiddp_add_gemm_backend(openblas MPIDDP_HAVE_OPENBLAS "${OpenBLAS_INCLUDE_DIRS}" "${OpenBLAS_LIBRARIES}")
  endif()
endif()
if("blis" IN_LIST _mpiddp_gemm_wanted)
  # Debian puts each threading variant's header in its own directory.
  find_path(MPIDDP_BLIS_INCLUDE blis.h PATH_SUFFIXES x86_64-linux-gnu/blis-openmp
            x86_64-linux-gnu/blis-pthread x86_64-linux-gnu/blis-serial blis)
  find_library(MPIDDP_BLIS_LIBRARY blis)
  if(MPIDDP_BLIS_INCLUDE AND MPIDDP_BLIS_LIBRARY)
    mpiddp_add_gemm_backend(blis MPIDDP_HAVE_BLIS "${MPIDDP_BLIS_INCLUDE}" "${MPIDDP_BLIS_LIBRARY}")
  endif()
endif()
if("onednn" IN_LIST _mpiddp_gemm_wanted)
  # Not Debian's dnnl-config.cmake: it requires the OpenCL headers of the GPU runtime.
  find_path(MPIDDP_DNNL_INCLUDE oneapi/dnnl/dnnl.h)
  find_library(MPIDDP_DNNL_LIBRARY dnnl)
  if(MPIDDP_DNNL_INCLUDE AND MPIDDP_DNNL_LIBRARY)
    mpiddp_add_gemm_backend(onednn MPIDDP_HAVE_ONEDNN "${MPIDDP_DNNL_INCLUDE}" "${MPIDDP_DNNL_LIBRARY}")
  endif()
endif()
foreach(lib IN LISTS _mpiddp_gemm_required)
  if(NOT lib IN_LIST MPIDDP_GEMM_FOUND)
    message(FATAL_ERROR "MPIDDP_GEMM asks for ${lib}, which was not found: scripts/install-deps.sh installs it")
  endif()
endforeach()
message(STATUS "mpiddp: matrix products by eigen ${MPIDDP_GEMM_FOUND}")
