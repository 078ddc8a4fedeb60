// What memory-mapping a .npy file saves: loads a float32 [samples, features] file as a
// float32 dataset (mapped, zero copy) and as float64 (converted into memory), reads every
// second sample like rank 0 of 2, and prints load time and the process's private
// (RssAnon) and file-backed (RssFile) resident memory at each point.
//
// Usage: npy_mapping_bench [DIR] [SAMPLES] [FEATURES]   (defaults: /tmp 100000 1024 = 400 MB)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mpiddp/data/npy.hpp"

namespace {

long status_mb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  long kb = 0;
  while (in >> key)
    if (key == field + ":") return (in >> kb, kb / 1024);
  return -1;
}

// A version 1.0 .npy of little-endian float32 values i * 1e-3 (mod 1000).
void write_npy(const std::string& path, long samples, long features) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                     std::to_string(samples) + ", " + std::to_string(features) + "), }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::ofstream out(path, std::ios::binary);
  out << "\x93NUMPY\x01" << '\0' << static_cast<char>(dict.size() & 0xff)
      << static_cast<char>(dict.size() >> 8) << dict;
  std::vector<float> row(static_cast<size_t>(features));
  for (long i = 0; i < samples; ++i) {
    for (long f = 0; f < features; ++f) row[f] = static_cast<float>((i * features + f) % 1000) * 1e-3f;
    out.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * 4));
  }
}

template <typename T>
void measure(const char* what, const mpiddp::data::NpyConfig& config) {
  const auto start = std::chrono::steady_clock::now();
  const auto d = mpiddp::data::load_npy<T>(config);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long anon = status_mb("RssAnon"), file = status_mb("RssFile");
  double sum = 0.0;
  for (mpiddp::Index i = 0; i < d.samples; i += 2)
    for (mpiddp::Index f = 0; f < d.features; ++f) sum += d.x[i * d.features + f];
  std::printf("%-22s load %6.2f s | after load: RssAnon %5ld MB, RssFile %5ld MB | after reading "
              "every 2nd sample: RssAnon %5ld MB, RssFile %5ld MB (checksum %.6g)\n",
              what, seconds, anon, file, status_mb("RssAnon"), status_mb("RssFile"), sum);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp";
  const long samples = argc > 2 ? std::atol(argv[2]) : 100000;
  const long features = argc > 3 ? std::atol(argv[3]) : 1024;
  const mpiddp::data::NpyConfig config{dir + "/npy_mapping_bench_x.npy", dir + "/npy_mapping_bench_y.npy", 0};
  write_npy(config.features, samples, features);
  write_npy(config.targets, samples, 1);
  std::printf("%ld x %ld float32 = %.0f MB (file in the page cache, just written)\n", samples,
              features, samples * features * 4.0 / 1e6);
  measure<float>("float32 (mapped):", config);
  measure<double>("float64 (converted):", config);
  std::filesystem::remove(config.features);
  std::filesystem::remove(config.targets);
}
