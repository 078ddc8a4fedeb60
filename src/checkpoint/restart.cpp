#include "mpiddp/checkpoint/restart.hpp"

#include <fstream>
#include <limits>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::checkpoint {

RestartInfo parse_restart_info(const std::string& text) {
  const io::Json json = io::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object())
    throw ConfigError("--restart", "expected a JSON object such as {\"attempt\":1,\"exit_code\":137}, "
                                   "got '" + text + "'");
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  io::JsonSection section(&json, "--restart");
  RestartInfo info;
  if (!section.has("attempt")) throw ConfigError("--restart.attempt", "is required (1 for the first restart)");
  info.attempt = section.integer("attempt", 1, 1, kMax);
  if (section.has("exit_code")) info.exit_code = section.integer("exit_code", 0, -kMax, kMax);
  if (section.has("previous_world_size"))
    info.previous_world_size = section.integer("previous_world_size", 1, 1, kMax);
  info.reason = section.text("reason", "");
  section.finish();
  return info;
}

namespace {

// Whether a record of the previous attempt happened before the position the new attempt
// resumes from. Records name their step or their epoch (docs/log-format.md); an epoch
// record is written when its epoch is done, so epochs before resume_at.epoch are kept.
bool precedes(const io::Json& record, const TrainingPosition& resume_at) {
  const std::string kind = record.value("kind", std::string());
  if (kind == "end") return false;
  if (kind == "epoch")
    return record.contains("epoch") && record["epoch"].is_number_integer() &&
           record["epoch"].get<int64_t>() < resume_at.epoch;
  const auto step = record.find("step");
  return step == record.end() || !step->is_number_integer() || step->get<int64_t>() <= resume_at.step;
}

}  // namespace

std::vector<std::string> log_lines_until(const std::string& path, const TrainingPosition& resume_at) {
  std::ifstream in(path);
  std::vector<std::string> kept;
  std::string line;
  while (std::getline(in, line)) {
    // A record is complete only with its newline: a line cut short by a crash is dropped.
    if (in.eof()) break;
    const io::Json record = io::Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object()) continue;
    if (kept.empty() && record.value("kind", std::string()) != "run") return {};
    if (precedes(record, resume_at)) kept.push_back(line);
  }
  return kept;
}

}  // namespace mpiddp::checkpoint
