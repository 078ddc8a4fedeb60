#pragma once
// A scratch directory for tests that write files (checkpoints, weights, orders). Unique per
// process, so the np=1 and np=2 runs of an MPI test, which ctest runs at the same time, never
// share one; in an MPI test only rank 0 makes it (see resume_mpi_test.cpp).
#include <unistd.h>

#include <filesystem>
#include <string>

namespace mpiddp::test {

// A fresh, empty directory under the system temp dir, unique per process and name.
inline std::string scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mpiddp_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace mpiddp::test
