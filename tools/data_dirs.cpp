#include "data_dirs.hpp"

#include <filesystem>
#include <system_error>

namespace mpiddp::tools {

namespace {

namespace fs = std::filesystem;

bool has_launch_dir(const fs::path& root) {
  std::error_code error;
  return fs::is_regular_file(root / "launch" / "mpirun.sh", error);
}

DataDirs dirs_at(const fs::path& root, bool found) {
  return {(root / "launch").lexically_normal().string(),
          (root / "configs").lexically_normal().string(), found};
}

}  // namespace

DataDirs find_data_dirs() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  const fs::path installed = error ? fs::path(MPIDDP_BIN_TO_DATA)
                                   : exe.parent_path() / MPIDDP_BIN_TO_DATA;
  if (!error && has_launch_dir(installed)) return dirs_at(installed, true);
  if (has_launch_dir(MPIDDP_SOURCE_DIR)) return dirs_at(MPIDDP_SOURCE_DIR, true);
  return dirs_at(installed, false);
}

}  // namespace mpiddp::tools
