#pragma once
// The data readers take paths: each fuzz input is written to one file per process under
// /dev/shm (memory, no disk traffic), overwritten on every execution.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace mpiddp::fuzz {

inline std::string write_temp_input(const uint8_t* data, size_t size, const char* suffix) {
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = std::string(dir) + "/mpiddp-fuzz-" + std::to_string(getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();  // the harness, not the reader, failed: stop rather than fuzz nothing
  }
  return path;
}

}  // namespace mpiddp::fuzz
