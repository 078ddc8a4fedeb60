# Chooses the MPI implementation at configure time: -DMPIDDP_MPI=openmpi|mpich|default.
#
# Debian installs both implementations side by side, each with suffixed wrappers
# (mpicxx.openmpi, mpiexec.mpich); the unsuffixed mpicxx/mpiexec are alternatives that point
# at one of them (Open MPI, by priority). FindMPI takes include paths and libraries from the
# -show output of MPI_CXX_COMPILER, so naming the suffixed wrapper and launcher is all it takes.
# "default" leaves FindMPI to its own search (the unsuffixed wrappers on PATH).
set(MPIDDP_MPI "default" CACHE STRING "MPI implementation: default, openmpi or mpich")
set_property(CACHE MPIDDP_MPI PROPERTY STRINGS default openmpi mpich)

if(NOT MPIDDP_MPI MATCHES "^(default|openmpi|mpich)$")
  message(FATAL_ERROR "MPIDDP_MPI is '${MPIDDP_MPI}'; expected default, openmpi or mpich")
endif()

if(NOT MPIDDP_MPI STREQUAL "default")
  find_program(_mpiddp_wrapper NAMES mpicxx.${MPIDDP_MPI} NO_CACHE)
  find_program(_mpiddp_launcher NAMES mpiexec.${MPIDDP_MPI} NO_CACHE)
  if(NOT _mpiddp_wrapper OR NOT _mpiddp_launcher)
    message(FATAL_ERROR "MPIDDP_MPI=${MPIDDP_MPI}: mpicxx.${MPIDDP_MPI} or mpiexec.${MPIDDP_MPI} "
                        "is not installed. Open MPI comes with scripts/install-deps.sh, MPICH "
                        "with scripts/install-deps.sh --with-mpich.")
  endif()
  # FindMPI caches what it found, so switching implementation in an existing build directory
  # would silently keep the old one: refuse and ask for a fresh directory instead.
  if(DEFINED CACHE{MPI_CXX_COMPILER} AND NOT MPI_CXX_COMPILER STREQUAL _mpiddp_wrapper)
    message(FATAL_ERROR "MPIDDP_MPI=${MPIDDP_MPI} wants ${_mpiddp_wrapper}, but this build "
                        "directory was configured with ${MPI_CXX_COMPILER}; use a new build directory")
  endif()
  set(MPI_CXX_COMPILER "${_mpiddp_wrapper}" CACHE FILEPATH "MPI C++ compiler wrapper")
  set(MPIEXEC_EXECUTABLE "${_mpiddp_launcher}" CACHE FILEPATH "MPI launcher")
endif()
