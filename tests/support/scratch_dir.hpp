#pragma once
// A scratch directory for tests that write files (checkpoints, weights, orders). Unique per
// process, so the np=1 and np=2 runs of an MPI test, which ctest runs at the same time, never
// share one; in an MPI test only rank 0 makes it (shared_scratch_dir).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::test {

// The directories made so far; removed when the process exits, so no test leaves files.
inline std::vector<std::string>& scratch_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

// A fresh, empty directory under the system temp dir, unique per process and name.
inline std::string scratch_dir(const std::string& name) {
  static std::once_flag cleanup;
  std::call_once(cleanup, [] {
    // The list must exist before the handler is registered: handlers and static
    // destructors run in reverse order, so the list then outlives the handler.
    scratch_dirs();
    std::atexit([] {
      std::error_code ignored;
      for (const auto& dir : scratch_dirs()) std::filesystem::remove_all(dir, ignored);
    });
  });
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mpiddp_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  scratch_dirs().push_back(dir.string());
  return dir.string();
}

// A scratch directory made by rank 0 and known to every rank.
inline std::string shared_scratch_dir(distributed::Communicator& comm, const std::string& name) {
  std::string dir = comm.rank() == 0 ? scratch_dir(name) : "";
  uint64_t size = dir.size();
  comm.broadcast(&size, sizeof size, 0);
  dir.resize(size);
  comm.broadcast(dir.data(), size, 0);
  return dir;
}

}  // namespace mpiddp::test
