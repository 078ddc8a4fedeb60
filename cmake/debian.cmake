# `cpack -G DEB` in the build directory: two Debian packages from the install components
# (cmake/package.cmake), as Debian splits a library:
#   mpiddp_<version>_<arch>.deb       the program, launch scripts and configs (component runtime).
#     Its Depends are measured, not guessed: dpkg-shlibdeps reads the binary's shared
#     libraries (libopenmpi3 or libmpich12, libgomp1, zlib1g, libstdc++6, libgcc-s1, libc6),
#     plus the launcher it is run with (openmpi-bin or mpich), which no library names.
#   mpiddp-dev_<version>_<arch>.deb   headers, static libraries and the CMake package
#     (component dev); it depends on mpiddp of the same version and the -dev packages that
#     find_package(mpiddp) finds.
# So a machine that only trains installs no compiler and no headers.
#
# The default build is portable (x86-64-v3, our kernels chosen at run time: docs/isa.md), and
# so are its packages; a build with MPIDDP_NATIVE=ON is for this machine's CPU only.
if(MPI_CXX_LIB_NAMES MATCHES "mpich")
  set(_mpiddp_deb_launcher mpich)
  set(_mpiddp_deb_mpi_dev libmpich-dev)
else()
  set(_mpiddp_deb_launcher openmpi-bin)
  set(_mpiddp_deb_mpi_dev libopenmpi-dev)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mpiddp)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "data-parallel neural-network training over MPI")
set(CPACK_PACKAGE_CONTACT "mpiddp developers <mpiddp@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)  # mpiddp-dev Depends: mpiddp (= version)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME mpiddp)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS ${_mpiddp_deb_launcher})
set(CPACK_DEBIAN_DEV_PACKAGE_NAME mpiddp-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The static libraries link the matrix-product libraries built in (cmake/gemm_backends.cmake)
# by their development symlinks, which only their -dev packages install.
set(_mpiddp_deb_gemm_dev "")
foreach(_lib IN ITEMS openblas blis dnnl)
  set(_name ${_lib})
  if(_lib STREQUAL "dnnl")
    set(_name onednn)
  endif()
  if(_name IN_LIST MPIDDP_GEMM_FOUND)
    string(APPEND _mpiddp_deb_gemm_dev ", lib${_lib}-dev")
  endif()
endforeach()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libeigen3-dev, nlohmann-json3-dev, zlib1g-dev, libsentencepiece-dev, ${_mpiddp_deb_mpi_dev}${_mpiddp_deb_gemm_dev}")

include(CPack)
cpack_add_component(runtime DISPLAY_NAME "mpiddp program, launch scripts and configs")
cpack_add_component(dev DISPLAY_NAME "mpiddp headers, libraries and CMake package" DEPENDS runtime)
