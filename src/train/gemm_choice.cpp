#include "mpiddp/train/gemm_choice.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <fstream>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/io/atomic_file.hpp"

namespace mpiddp::train {
namespace {

using io::Json;

// Half a second at most for the measurement: small next to any run worth choosing for.
constexpr double kBudgetSeconds = 0.5;
// A library must beat Eigen by 3 % to be chosen (nn::fastest_gemm_backend).
constexpr double kMargin = 0.03;

// The CPU as /proc/cpuinfo names it: the model and its feature flags.
std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 1);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 1);
  }
  return model + "|" + flags;
}

template <typename T>
std::string cache_key(const std::vector<kernels::GemmCall>& calls, int threads) {
  std::string text = cpu_identity() + "|" MPIDDP_VERSION "|" __VERSION__ "|threads " + std::to_string(threads) +
                     (sizeof(T) == 4 ? "|float32" : "|float64");
  // The products timed on one thread or on all (Note [threads per product]) time apart.
  if (const double limit = kernels::one_thread_limit(); limit > 0) text += "|one thread below " + std::to_string(limit);
  for (kernels::GemmBackend b : kernels::available_gemm_backends()) text += "|" + kernels::gemm_backend_library(b);
  for (const kernels::GemmCall& call : calls) text += "|" + kernels::gemm_shape_text(call.shape) + "*" + std::to_string(call.count);
  return hex64(fnv1a(text));
}

Json timings_json(const std::vector<kernels::GemmTiming>& timings) {
  Json out = Json::object();
  // Microseconds are all a timing of this kind can tell.
  for (const kernels::GemmTiming& t : timings) out[kernels::gemm_backend_name(t.backend)] = std::round(t.seconds * 1e6) / 1e6;
  return out;
}

std::vector<kernels::GemmTiming> timings_from(const Json& j) {
  std::vector<kernels::GemmTiming> out;
  for (kernels::GemmBackend b : kernels::available_gemm_backends())
    if (j.contains(kernels::gemm_backend_name(b)) && j[kernels::gemm_backend_name(b)].is_number())
      out.push_back({b, j[kernels::gemm_backend_name(b)].get<double>()});
  return out;
}

template <typename T>
GemmChoice measure(const std::vector<kernels::GemmCall>& calls, int threads) {
  GemmChoice choice;
  choice.how = "measured";
  choice.timings = kernels::time_gemm_backends<T>(calls, threads, kBudgetSeconds);
  choice.backend = kernels::fastest_gemm_backend(choice.timings, kMargin);
  return choice;
}

// Holds an exclusive lock on a file for as long as it lives.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

}  // namespace

io::Json gemm_record(const GemmChoice& choice) {
  io::Json record = {{"backend", kernels::gemm_backend_name(choice.backend)},
                     {"library", kernels::gemm_backend_library(choice.backend)},
                     {"chosen", choice.how}};
  if (!choice.timings.empty()) record["seconds"] = timings_json(choice.timings);
  if (!choice.cache.empty()) record["cache"] = choice.cache;
  if (!choice.rule.empty()) record["rule"] = choice.rule;
  return record;
}

std::string gemm_cache_directory() {
  if (const char* dir = std::getenv("MPIDDP_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/mpiddp";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/mpiddp";
  return "";
}

template <typename T>
GemmChoice choose_gemm(const std::string& configured, const std::vector<kernels::GemmCall>& calls, int threads) {
  GemmChoice choice;
  if (configured != "auto") {
    if (!kernels::find_gemm_backend(configured, &choice.backend))
      throw ConfigError("compute.gemm", configured + " is not built into this mpiddp");
    choice.how = "config";
    return choice;
  }
  const std::string dir = gemm_cache_directory();
  std::error_code failed;
  if (!dir.empty()) std::filesystem::create_directories(dir, failed);
  if (dir.empty() || failed) {
    choice = measure<T>(calls, threads);
    choice.cache = dir.empty() ? "none: no MPIDDP_CACHE_DIR, XDG_CACHE_HOME or HOME" : "none: cannot create " + dir;
    return choice;
  }
  const std::string path = dir + "/gemm.json";
  FileLock lock(dir + "/gemm.lock");
  Json cache = Json::object();
  {
    std::ifstream in(path);
    if (in) cache = Json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!cache.is_object()) cache = Json::object();  // a damaged cache is measured anew
  }
  const std::string key = cache_key<T>(calls, threads);
  const Json* entry = cache.contains(key) && cache[key].is_object() ? &cache[key] : nullptr;
  if (entry && kernels::find_gemm_backend(entry->value("backend", std::string()), &choice.backend)) {
    choice.how = "cached";
    choice.timings = timings_from(entry->value("seconds", Json::object()));
    choice.cache = path;
    return choice;
  }
  choice = measure<T>(calls, threads);
  choice.cache = path;
  cache[key] = {{"backend", kernels::gemm_backend_name(choice.backend)}, {"seconds", timings_json(choice.timings)}};
  const std::string text = cache.dump(1) + "\n";
  try {
    if (lock.held()) {
      io::write_file_atomically(path, {{text.data(), text.size()}});
    } else {
      choice.cache = "not written: the lock on " + dir + "/gemm.lock was not taken";
    }
  } catch (const Error& e) {
    choice.cache = std::string("not written: ") + e.what();  // the run goes on; the next one measures again
  }
  return choice;
}

template GemmChoice choose_gemm<float>(const std::string&, const std::vector<kernels::GemmCall>&, int);
template GemmChoice choose_gemm<double>(const std::string&, const std::vector<kernels::GemmCall>&, int);

}  // namespace mpiddp::train
