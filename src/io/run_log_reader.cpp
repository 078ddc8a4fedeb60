#include "mpiddp/io/run_log_reader.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "mpiddp/core/error.hpp"

namespace mpiddp::io {

namespace {

// Where a record came from, for error messages: "runs/a.jsonl:7".
struct Origin {
  const std::string& path;
  int64_t line;
  std::string where() const { return path + ":" + std::to_string(line); }
};

const Json& field(const Json& record, const char* name, const Origin& origin) {
  const auto it = record.find(name);
  if (it == record.end())
    throw DataError(origin.where() + ": " + record.value("kind", std::string("?")) +
                    " record has no \"" + name + "\"");
  return *it;
}

double number(const Json& record, const char* name, const Origin& origin) {
  const Json& value = field(record, name, origin);
  // The trainer writes NaN and Inf as null (JSON has no such numbers): read them as NaN so
  // the comparison reports them rather than the reader rejecting the log.
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!value.is_number())
    throw DataError(origin.where() + ": \"" + name + "\" should be a number, got " + value.dump());
  return value.get<double>();
}

int64_t integer(const Json& record, const char* name, const Origin& origin) {
  const Json& value = field(record, name, origin);
  if (!value.is_number_integer())
    throw DataError(origin.where() + ": \"" + name + "\" should be an integer, got " + value.dump());
  return value.get<int64_t>();
}

void read_run_record(const Json& record, const Origin& origin, RunLog& log) {
  log.world_size = static_cast<int>(integer(record, "world_size", origin));
  log.config = field(record, "config", origin);
  if (!log.config.is_object())
    throw DataError(origin.where() + ": \"config\" should be an object");
  log.launcher = record.value("launcher", std::string());
  if (const auto hosts = record.find("hosts"); hosts != record.end() && hosts->is_array())
    for (const auto& host : *hosts) log.hosts.push_back(host.is_string() ? host.get<std::string>() : host.dump());
}

}  // namespace

std::string RunLog::dtype() const { return config.value("dtype", std::string("float32")); }

std::string RunLog::precision() const {
  const Json compute = config.value("compute", Json::object());
  return compute.is_object() ? compute.value("precision", std::string("float32")) : std::string("float32");
}

RunLog read_run_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError("cannot open the run log '" + path + "': " + std::strerror(errno));
  RunLog log;
  log.path = path;
  std::string text;
  bool seen_run = false;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Origin origin{path, line};
    Json record = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object() || !record.contains("kind"))
      throw DataError(origin.where() + ": not an mpiddp run log (each line should be a JSON "
                                       "object with a \"kind\"; see docs/log-format.md)");
    const std::string kind = record["kind"].is_string() ? record["kind"].get<std::string>() : "";
    if (!seen_run && kind != "run")
      throw DataError(origin.where() + ": not an mpiddp run log (the first record should be "
                                       "{\"kind\":\"run\",...}, got kind \"" + kind + "\")");
    if (kind == "run") {
      if (seen_run)
        throw DataError(origin.where() + ": a second run record; one log holds one run");
      seen_run = true;
      read_run_record(record, origin, log);
    } else if (kind == "step") {
      log.steps.push_back({integer(record, "epoch", origin), integer(record, "step", origin),
                           number(record, "loss", origin), number(record, "lr", origin)});
    } else if (kind == "epoch") {
      EpochRecord e{integer(record, "epoch", origin), number(record, "eval_loss", origin), {}};
      if (record.contains("eval_accuracy")) e.eval_accuracy = number(record, "eval_accuracy", origin);
      log.epochs.push_back(e);
    } else if (kind == "end") {
      EndRecord e;
      e.steps = integer(record, "steps", origin);
      e.param_checksum = record.value("param_checksum", std::string());
      const Json& identical = field(record, "replicas_identical", origin);
      if (!identical.is_boolean())
        throw DataError(origin.where() + ": \"replicas_identical\" should be true or false");
      e.replicas_identical = identical.get<bool>();
      e.max_replica_diff = number(record, "max_replica_diff", origin);
      log.end = e;
    }
  }
  if (!seen_run) throw DataError("'" + path + "' is empty: not an mpiddp run log");
  return log;
}

}  // namespace mpiddp::io
