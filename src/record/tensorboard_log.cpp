#include "mpiddp/record/tensorboard_log.hpp"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string_view>

#include "mpiddp/core/crc32c.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::record {

// Note [event file]
// ~~~~~~~~~~~~~~~~~
// An event file is a TFRecord file of serialized tensorflow.Event protocol buffers. Each
// record is framed as
//   uint64 length, uint32 masked_crc32c(the 8 length bytes), data, uint32 masked_crc32c(data)
// all little-endian, where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (a CRC of
// data that itself holds CRCs is masked so it looks random). The first event carries only
// wall_time and file_version "brain.Event:2"; each later one wall_time, step and a Summary.
// The three messages, as TensorFlow's event.proto and summary.proto declare the fields we use:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// In the wire format a field is a key varint (field number << 3 | wire type) then its value:
// wire type 0 a varint (7 bits a byte, least significant first, the high bit set on all
// bytes but the last; a negative int64 takes 10 bytes), 1 eight bytes (the double), 2 a
// varint length and that many bytes (strings and messages), 5 four bytes (the float).
// tests/record/log_formats_test.cpp decodes files with a reader of its own, and
// tools/read_tensorboard.py with the protobuf library.

namespace {

void tb_put_varint(std::string& out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out += static_cast<char>((value & 0x7F) | 0x80);
  out += static_cast<char>(value);
}

void tb_put_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

enum TbWireType { kTbVarint = 0, kTbFixed64 = 1, kTbLengthDelimited = 2, kTbFixed32 = 5 };

void tb_put_key(std::string& out, int field, TbWireType type) {
  tb_put_varint(out, static_cast<uint64_t>(field) << 3 | type);
}

void tb_put_bytes(std::string& out, int field, std::string_view bytes) {
  tb_put_key(out, field, kTbLengthDelimited);
  tb_put_varint(out, bytes.size());
  out += bytes;
}

// Value { string tag = 1; float simple_value = 2; }
std::string tb_value(std::string_view tag, float value) {
  std::string out;
  tb_put_bytes(out, 1, tag);
  tb_put_key(out, 2, kTbFixed32);
  tb_put_little_endian(out, std::bit_cast<uint32_t>(value), 4);
  return out;
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
// As a protobuf library writes it: a field that holds its default (0, "") is left out.
std::string tb_event(double wall_time, int64_t step, std::string_view file_version,
                     std::string_view summary) {
  std::string out;
  tb_put_key(out, 1, kTbFixed64);
  tb_put_little_endian(out, std::bit_cast<uint64_t>(wall_time), 8);
  if (step != 0) {
    tb_put_key(out, 2, kTbVarint);
    tb_put_varint(out, static_cast<uint64_t>(step));  // two's complement: 10 bytes if negative
  }
  if (!file_version.empty()) tb_put_bytes(out, 3, file_version);
  if (!summary.empty()) tb_put_bytes(out, 5, summary);
  return out;
}

uint32_t tb_masked_crc(const void* data, size_t bytes) {
  const uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// One TFRecord: length, its CRC, the data, its CRC.
std::string tb_framed(const std::string& data) {
  std::string out;
  tb_put_little_endian(out, data.size(), 8);
  tb_put_little_endian(out, tb_masked_crc(out.data(), 8), 4);
  out += data;
  tb_put_little_endian(out, tb_masked_crc(data.data(), data.size()), 4);
  return out;
}

double tb_seconds_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string tb_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// The record field behind each tag (the table in the header).
struct TbScalar {
  const char* field;
  const char* tag;
};
constexpr TbScalar tb_scalars[] = {
    {"loss", "train/loss"},          {"lr", "train/lr"},
    {"grad_norm", "train/grad_norm"}, {"train_loss", "train/epoch_loss"},
    {"samples_per_s", "train/samples_per_s"}, {"eval_loss", "eval/loss"},
    {"eval_accuracy", "eval/accuracy"}, {"eval_loss_ema", "eval/loss_ema"}, {"eval_bpb", "eval/bpb"}};

bool tb_logged_kind(const io::Json& record) {
  const auto kind = record.find("kind");
  if (kind == record.end() || !kind->is_string()) return false;
  const auto& k = kind->get_ref<const std::string&>();
  return k == "step" || k == "eval" || k == "epoch";
}

// The event's step: the record's step, else its epoch (an epoch record has no step), else 0.
int64_t tb_step_of(const io::Json& record) {
  for (const char* key : {"step", "epoch"}) {
    const auto field = record.find(key);
    if (field != record.end() && field->is_number_integer()) return field->get<int64_t>();
  }
  return 0;
}

[[noreturn]] void tb_fail(const std::string& what, const std::string& path, const std::string& reason) {
  throw Error(kExitOutput, "cannot " + what + " '" + path + "': " + reason +
                               " (is it a writable directory, or can it be created; is the disk full?)");
}

}  // namespace

TensorboardLog::TensorboardLog(const std::string& directory) {
  namespace fs = std::filesystem;
  if (directory.empty()) tb_fail("create the TensorBoard directory", directory, "the name is empty");
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) tb_fail("create the TensorBoard directory", directory, error.message());
  if (!fs::is_directory(directory, error))
    tb_fail("create the TensorBoard directory", directory, "it exists and is not a directory");

  const double now = tb_seconds_now();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(now));
  file_path_ = (fs::path(directory) / ("events.out.tfevents." + std::string(seconds) + "." +
                                       tb_host_name() + "." + std::to_string(::getpid()) + ".mpiddp"))
                   .string();
  file_ = std::fopen(file_path_.c_str(), "wbx");  // x: never truncate another run's file
  if (!file_) tb_fail("create the TensorBoard event file", file_path_, std::strerror(errno));
  try {
    write_event(tb_event(now, 0, "brain.Event:2", ""));
  } catch (...) {
    std::fclose(file_);  // the destructor does not run for a constructor that throws
    throw;
  }
}

TensorboardLog::~TensorboardLog() {
  if (!file_) return;
  std::fflush(file_);
  ::fsync(fileno(file_));  // the end of a run is durable; failures were reported by write()
  std::fclose(file_);
}

void TensorboardLog::write(const io::Json& record) {
  if (!tb_logged_kind(record)) return;
  std::string summary;  // Summary { repeated Value value = 1; }
  for (const auto& scalar : tb_scalars) {
    const auto field = record.find(scalar.field);
    if (field == record.end()) continue;
    // null is how the JSON log carries a NaN (a record read back from it).
    if (field->is_null())
      tb_put_bytes(summary, 1, tb_value(scalar.tag, std::numeric_limits<float>::quiet_NaN()));
    else if (field->is_number())
      tb_put_bytes(summary, 1, tb_value(scalar.tag, static_cast<float>(field->get<double>())));
  }
  if (summary.empty()) return;  // nothing to plot
  write_event(tb_event(tb_seconds_now(), tb_step_of(record), "", summary));
}

void TensorboardLog::write_event(const std::string& event) {
  const std::string record = tb_framed(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
    tb_fail("write the TensorBoard event file", file_path_, std::strerror(errno));
}

}  // namespace mpiddp::record
