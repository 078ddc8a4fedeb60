#pragma once
// Where the launch scripts and example configs of this mpiddp are, for `mpiddp --help`.
#include <string>

namespace mpiddp::tools {

struct DataDirs {
  std::string launch;   // launch/: mpirun.sh, slurm.sbatch, compare_baseline.sh, local-slurm/
  std::string configs;  // configs/: default.json, fashion_mnist.json, ...
  bool found = false;   // false: neither place has them; the fields name the install layout
};

// Installed: the program's own directory's ../share/mpiddp (found through /proc/self/exe,
// so a moved prefix still works). In a build tree, which has no share/: the source tree's
// launch/ and configs/, which is where the build's scripts and configs are.
DataDirs find_data_dirs();

}  // namespace mpiddp::tools
