// Where checkpoints live: their file names (a file's, and a checkpoint in parts' directory and
// index), the ones a directory holds, the temporaries a crash left, and what --resume names
// (include/mpiddp/checkpoint/checkpoint.hpp, checkpoint_parts.hpp).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "checkpoint_metadata.hpp"
#include "mpiddp/checkpoint/checkpoint_parts.hpp"

namespace mpiddp::checkpoint {

namespace fs = std::filesystem;

namespace {

// "step-000000000016.safetensors" (or, with tail ".parts", a checkpoint in parts'
// "step-000000000016.parts") -> 16; -1 for any other name (temporary files included).
int64_t step_of_file_name(const std::string& name, const std::string& tail = ".safetensors") {
  const std::string head = "step-";
  if (name.size() <= head.size() + tail.size() || name.compare(0, head.size(), head) != 0 ||
      name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    return -1;
  const std::string digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

// "<dir>/step-000000000016<tail>": the name step_of_file_name reads back.
std::string step_path(const std::string& dir, int64_t step, const char* tail) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%012lld%s", static_cast<long long>(step), tail);
  return (fs::path(dir) / name).string();
}

constexpr const char* kPartsIndexName = "index.json";

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) { return step_path(dir, step, ".safetensors"); }

std::string best_checkpoint_path(const std::string& dir) { return (fs::path(dir) / "best").string(); }

std::string parts_checkpoint_path(const std::string& dir, int64_t step) { return step_path(dir, step, ".parts"); }

std::string best_parts_path(const std::string& dir) { return (fs::path(dir) / "best.parts").string(); }

std::string parts_index_path(const std::string& checkpoint) {
  return (fs::path(checkpoint) / kPartsIndexName).string();
}

bool is_parts_checkpoint(const std::string& path) {
  std::error_code error;
  return fs::is_directory(path, error) && fs::is_regular_file(parts_index_path(path), error);
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const int64_t step = step_of_file_name(name);
    if (step >= 0 && entry.is_regular_file()) found.emplace_back(step, entry.path().string());
    // A checkpoint in parts is one once its index is there (checkpoint_parts.hpp).
    const int64_t parts_step = step_of_file_name(name, ".parts");
    if (parts_step >= 0 && is_parts_checkpoint(entry.path().string()))
      found.emplace_back(parts_step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

void remove_checkpoint(const std::string& path) {
  std::error_code error;
  // A checkpoint in parts loses its index first: a kill halfway leaves a directory that is no
  // checkpoint (and that the next start clears), never one that looks whole but lacks parts.
  if (fs::is_directory(path, error)) fs::remove(parts_index_path(path), error);
  fs::remove_all(path, error);  // a checkpoint that cannot be removed is only wasted space
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    // ".NAME.tmp" of a checkpoint NAME, and nothing else: other files there are the user's.
    const bool ours = name.size() > 5 && name[0] == '.' && name.ends_with(".tmp") &&
                      (step_of_file_name(name.substr(1, name.size() - 5)) >= 0 || name == ".best.tmp");
    if (ours && entry.is_regular_file() && fs::remove(entry.path(), error)) removed.push_back(name);
    // A checkpoint in parts whose index never landed: its parts are of a write that was killed.
    const bool parts = step_of_file_name(name, ".parts") >= 0 || name == "best.parts";
    if (!parts || !entry.is_directory(error)) continue;
    if (!is_parts_checkpoint(entry.path().string())) {
      if (fs::remove_all(entry.path(), error) > 0) removed.push_back(name + "/");
    } else {
      // Files a killed rewrite of the best left beside the parts its index names.
      for (const auto& file : remove_unindexed_files(entry.path().string())) removed.push_back(name + "/" + file);
    }
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

std::string resolve_resume_path(const std::string& spec, const std::string& checkpoint_dir) {
  std::string dir;
  if (spec == "auto") {
    // What a launcher's restart passes: the attempt before may have died before its first
    // checkpoint, or the run may keep none; then the run starts from the beginning.
    const auto all = checkpoint_dir.empty() ? std::vector<std::string>{} : list_checkpoints(checkpoint_dir);
    return all.empty() ? std::string() : all.back();
  }
  if (spec == "best") {
    if (checkpoint_dir.empty())
      throw Error(kExitConfig, "--resume best needs checkpoint.dir in the config (or give "
                               "the checkpoint's path)");
    const std::string best = best_checkpoint_path(checkpoint_dir);
    // The best checkpoint in parts, when checkpoint.format is "parts". Writing one format's best
    // removes the other's; a kill between the two leaves both, and the newer is the best.
    const std::string parts = best_parts_path(checkpoint_dir);
    if (is_parts_checkpoint(parts)) {
      std::error_code error;
      const bool file_newer = fs::is_regular_file(best, error) &&
                              fs::last_write_time(best, error) > fs::last_write_time(parts_index_path(parts), error);
      return file_newer ? best : parts;
    }
    if (!fs::is_regular_file(best))
      throw Error(kExitCheckpoint, "--resume best: no best checkpoint '" + best +
                                       "' (checkpoint.keep_best writes it at the first evaluation)");
    return best;
  }
  if (spec == "latest") {
    if (checkpoint_dir.empty())
      throw Error(kExitConfig, "--resume latest needs checkpoint.dir in the config (or give "
                               "the checkpoint's path)");
    dir = checkpoint_dir;
  } else if (is_parts_checkpoint(spec)) {
    return spec;  // a checkpoint in parts is a directory too
  } else if (fs::is_directory(spec)) {
    dir = spec;
  } else {
    return spec;
  }
  const auto all = list_checkpoints(dir);
  if (all.empty())
    throw Error(kExitCheckpoint, "--resume " + spec + ": no checkpoint (step-*.safetensors or step-*.parts) in '" +
                                     dir + "'");
  return all.back();
}

}  // namespace mpiddp::checkpoint
