# What `cmake --install` puts where, and the CMake package that lets an outside project write
#   find_package(mpiddp 0.2 REQUIRED)      # or COMPONENTS core, for the MPI-free library only
#   target_link_libraries(app PRIVATE mpiddp::mpi)   # or mpiddp::core
# (docs/library.md). Layout under the prefix P:
#   bin/mpiddp                      the program                      component runtime
#   share/mpiddp/{launch,configs}/  launch scripts, example configs  component runtime
#   include/mpiddp/**               the public headers               component dev
#   lib/libmpiddp_{core,mpi}.a      the libraries (static)           component dev
#   lib/cmake/mpiddp/               the package config, version and targets files
# The components become the two Debian packages of cmake/debian.cmake.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MPIDDP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mpiddp)
set(MPIDDP_DATA_DIR ${CMAKE_INSTALL_DATADIR}/mpiddp)

# Names as the package exports them; the same names work inside this build.
set_target_properties(mpiddp_core PROPERTIES EXPORT_NAME core)
set_target_properties(mpiddp_mpi PROPERTIES EXPORT_NAME mpi)
add_library(mpiddp::core ALIAS mpiddp_core)
add_library(mpiddp::mpi ALIAS mpiddp_mpi)
add_executable(mpiddp::mpiddp ALIAS mpiddp)

install(TARGETS mpiddp EXPORT mpiddp-program
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY launch/ DESTINATION ${MPIDDP_DATA_DIR}/launch COMPONENT runtime
        USE_SOURCE_PERMISSIONS)
install(DIRECTORY configs/ DESTINATION ${MPIDDP_DATA_DIR}/configs COMPONENT runtime)

install(DIRECTORY include/mpiddp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(TARGETS mpiddp_core EXPORT mpiddp-core
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(TARGETS mpiddp_mpi EXPORT mpiddp-mpi
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# One targets file per component, so that COMPONENTS core loads no MPI target and needs no MPI.
foreach(part core mpi program)
  install(EXPORT mpiddp-${part} NAMESPACE mpiddp:: FILE mpiddp-${part}-targets.cmake
          DESTINATION ${MPIDDP_CMAKE_DIR} COMPONENT dev)
endforeach()

# The MPI the library was built against: a program linking mpiddp::mpi must use the same one
# (an Open MPI library with MPICH's headers links and then fails at run time).
if(MPIDDP_MPI STREQUAL "default")
  set(MPIDDP_PACKAGE_MPI_COMPILER "")
else()
  set(MPIDDP_PACKAGE_MPI_COMPILER "${MPI_CXX_COMPILER}")
endif()
configure_package_config_file(cmake/mpiddp-config.cmake.in
                              ${PROJECT_BINARY_DIR}/package/mpiddp-config.cmake
                              INSTALL_DESTINATION ${MPIDDP_CMAKE_DIR} PATH_VARS MPIDDP_DATA_DIR)
# Note [0.x versions]: before 1.0 a minor release may change the API (semantic versioning's
# rule for 0.y.z), so find_package(mpiddp 0.2) accepts 0.2.z with z >= the requested patch and
# refuses 0.3; SameMajorVersion would accept any 0.y. From 1.0 on this becomes SameMajorVersion.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/mpiddp-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/mpiddp-config.cmake
              ${PROJECT_BINARY_DIR}/package/mpiddp-config-version.cmake
        DESTINATION ${MPIDDP_CMAKE_DIR} COMPONENT dev)
