// The CSV and TensorBoard logs (record/csv_log.hpp, record/tensorboard_log.hpp) and CRC-32C
// (core/crc32c.hpp). The event files are read back by a reader of this file's own: a TFRecord
// reader that checks both CRCs of every record with a CRC-32C computed one bit at a time
// from its definition, and a decoder of the protobuf wire format that accepts the fields of
// Event, Summary and Value with their declared wire types and nothing else.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "../support/scratch_dir.hpp"
#include "mpiddp/core/crc32c.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/record/csv_log.hpp"
#include "mpiddp/record/tensorboard_log.hpp"

namespace mpiddp::record {
namespace {

constexpr double kLfNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kLfInf = std::numeric_limits<double>::infinity();

// ---- The reader ----

// CRC-32C by its definition: the reflected register shifts one bit at a time, xoring the
// polynomial 0x82F63B78 in when a 1 falls out; start and final xor 0xFFFFFFFF.
uint32_t lf_crc32c_bitwise(std::string_view bytes) {
  uint32_t r = 0xFFFFFFFF;
  for (unsigned char b : bytes) {
    r ^= b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1) ? (r >> 1) ^ 0x82F63B78u : r >> 1;
  }
  return ~r;
}

uint32_t lf_masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint64_t lf_little_endian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) value = value << 8 | static_cast<unsigned char>(bytes[i]);
  return value;
}

// The records of a TFRecord file (uint64 length, uint32 masked CRC of the length bytes, the
// data, uint32 masked CRC of the data); a std::runtime_error names the first bad record.
std::vector<std::string> lf_read_tfrecords(std::string_view file) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    const std::string where = "record " + std::to_string(records.size()) + " at byte " + std::to_string(at);
    if (file.size() - at < 12) throw std::runtime_error(where + ": truncated length");
    const std::string_view length_bytes = file.substr(at, 8);
    if (lf_little_endian(file.substr(at + 8, 4)) != lf_masked(lf_crc32c_bitwise(length_bytes)))
      throw std::runtime_error(where + ": wrong length CRC");
    const uint64_t length = lf_little_endian(length_bytes);
    at += 12;
    if (file.size() - at < 4 || length > file.size() - at - 4) throw std::runtime_error(where + ": truncated data");
    const std::string_view data = file.substr(at, length);
    if (lf_little_endian(file.substr(at + length, 4)) != lf_masked(lf_crc32c_bitwise(data)))
      throw std::runtime_error(where + ": wrong data CRC");
    records.emplace_back(data);
    at += length + 4;
  }
  return records;
}

// One message's bytes in protobuf's wire format, read field by field.
class LfWire {
 public:
  explicit LfWire(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return at_ == bytes_.size(); }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      if (shift > 63 || at_ == bytes_.size()) throw std::runtime_error("bad varint");
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      value |= uint64_t{byte & 0x7Fu} << shift;
      if (!(byte & 0x80)) return value;
    }
  }
  // The next field's number and wire type.
  std::pair<int, int> key() {
    const uint64_t key = varint();
    return {static_cast<int>(key >> 3), static_cast<int>(key & 7)};
  }
  uint64_t fixed(size_t bytes) {
    need(bytes);
    const uint64_t value = lf_little_endian(bytes_.substr(at_, bytes));
    at_ += bytes;
    return value;
  }
  std::string_view length_delimited() {
    const uint64_t length = varint();
    need(length);
    const std::string_view bytes = bytes_.substr(at_, length);
    at_ += length;
    return bytes;
  }

 private:
  void need(uint64_t bytes) const {
    if (bytes > bytes_.size() - at_) throw std::runtime_error("a field runs past the end of its message");
  }
  std::string_view bytes_;
  size_t at_ = 0;
};

[[noreturn]] void lf_unexpected(const std::string& message, std::pair<int, int> key) {
  throw std::runtime_error(message + ": unexpected field " + std::to_string(key.first) + " of wire type " +
                           std::to_string(key.second));
}

struct LfScalar {
  std::string tag;
  float value;
  // Bit for bit (so -0 differs from 0), except that any NaN equals any NaN.
  bool operator==(const LfScalar& o) const {
    return tag == o.tag && ((std::isnan(value) && std::isnan(o.value)) ||
                            std::bit_cast<uint32_t>(value) == std::bit_cast<uint32_t>(o.value));
  }
  friend std::ostream& operator<<(std::ostream& out, const LfScalar& s) {
    return out << s.tag << "=" << s.value;
  }
};

struct LfEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  bool has_summary = false;
  std::vector<LfScalar> values;
};

// Value { string tag = 1; float simple_value = 2; }
LfScalar lf_decode_value(std::string_view bytes) {
  LfWire in(bytes);
  LfScalar scalar;
  int seen = 0;
  while (!in.done()) {
    const auto key = in.key();
    if (key == std::pair{1, 2}) {
      scalar.tag = in.length_delimited();
    } else if (key == std::pair{2, 5}) {
      scalar.value = std::bit_cast<float>(static_cast<uint32_t>(in.fixed(4)));
    } else {
      lf_unexpected("Value", key);
    }
    ++seen;
  }
  if (seen != 2) throw std::runtime_error("a Value without both its tag and its simple_value");
  return scalar;
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
// Summary { repeated Value value = 1; }
LfEvent lf_decode_event(std::string_view bytes) {
  LfWire in(bytes);
  LfEvent event;
  while (!in.done()) {
    const auto key = in.key();
    if (key == std::pair{1, 1}) {
      event.wall_time = std::bit_cast<double>(in.fixed(8));
    } else if (key == std::pair{2, 0}) {
      event.step = static_cast<int64_t>(in.varint());
    } else if (key == std::pair{3, 2}) {
      event.file_version = in.length_delimited();
    } else if (key == std::pair{5, 2}) {
      event.has_summary = true;
      LfWire summary(in.length_delimited());
      while (!summary.done()) {
        const auto value_key = summary.key();
        if (value_key != std::pair{1, 2}) lf_unexpected("Summary", value_key);
        event.values.push_back(lf_decode_value(summary.length_delimited()));
      }
    } else {
      lf_unexpected("Event", key);
    }
  }
  return event;
}

std::string lf_read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::vector<LfEvent> lf_read_events(const std::string& path) {
  std::vector<LfEvent> events;
  for (const auto& record : lf_read_tfrecords(lf_read_file(path))) events.push_back(lf_decode_event(record));
  return events;
}

// ---- What the logs are given ----

// The trainer's records, with every case the two logs tell apart: kinds they ignore (which
// may hold the same fields), optional fields absent, a NaN (as a double, and as null, how a
// record read back from the JSON log carries it), infinities, an unknown field, an epoch
// record without a step and one with, a step of two varint bytes (300), a record with every
// scalar (a Summary of more than 127 bytes: a two-byte length), and one with none.
std::vector<io::Json> lf_records() {
  std::vector<io::Json> records;
  for (const char* line : {
           R"({"kind":"run","world_size":2,"loss":9})",
           R"({"kind":"step","epoch":1,"step":1,"loss":0.5,"lr":0.03,"time_s":0.002,"grad_norm":1.25})",
           R"({"kind":"step","epoch":1,"step":2,"loss":"NaN below","lr":0.03,"time_s":0.0025})",
           R"({"kind":"eval","epoch":1,"step":2,"eval_loss":0.3333333333333333})",
           R"({"kind":"checkpoint","path":"ck","epoch":1,"batch":2,"step":2})",
           R"({"kind":"epoch","epoch":1,"eval_loss":0.4,"eval_accuracy":0.8,"train_loss":0.39,"time_s":1.0,"samples_per_s":5000})",
           R"({"kind":"eval","epoch":2,"step":300,"eval_loss":1e-7,"eval_accuracy":0.875,"eval_loss_ema":null,"new_metric":2.5})",
           R"({"kind":"epoch","epoch":2,"step":300,"eval_loss":1e300,"train_loss":-0.0,"time_s":2,"samples_per_s":4999.5})",
           R"({"kind":"step","epoch":3,"step":301,"loss":0.1,"lr":1,"grad_norm":"inf below","time_s":0.001,
               "train_loss":0.2,"samples_per_s":3,"eval_loss":4.0,"eval_accuracy":0.5,"eval_loss_ema":4.5})",
           R"({"kind":"end","steps":301,"time_s":5})",
           R"({"kind":"eval","epoch":3,"step":302})",
       })
    records.push_back(io::Json::parse(line));
  records[2]["loss"] = kLfNaN;
  records[8]["grad_norm"] = kLfInf;
  return records;
}

// ---- CRC-32C ----

TEST(Crc32c, KnownValues) {
  // The check value of the CRC catalogue, and RFC 3720's vectors (B.4).
  std::string zeros(32, '\0'), ones(32, '\xFF'), ascending(32, '\0'), descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<char>(i);
    descending[i] = static_cast<char>(31 - i);
  }
  const std::pair<std::string, uint32_t> cases[] = {{"123456789", 0xE3069283u}, {zeros, 0x8A9136AAu},
                                                    {ones, 0x62A8AB43u},        {ascending, 0x46DD794Eu},
                                                    {descending, 0x113FDB5Cu},  {"", 0u}};
  for (const auto& [bytes, crc] : cases) {
    EXPECT_EQ(crc32c(bytes.data(), bytes.size()), crc) << bytes.size() << " bytes";
    EXPECT_EQ(lf_crc32c_bitwise(bytes), crc) << bytes.size() << " bytes";  // the reader's own
  }
}

TEST(Crc32c, ContinuesOverPieces) {
  const std::string text = "123456789";
  for (size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(crc32c(text.data() + cut, text.size() - cut, crc32c(text.data(), cut)), 0xE3069283u) << cut;
}

TEST(Crc32c, TableAgreesWithTheBitwiseDefinition) {
  std::string bytes;
  uint32_t x = 12345;
  for (int n = 0; n < 300; ++n) {
    EXPECT_EQ(crc32c(bytes.data(), bytes.size()), lf_crc32c_bitwise(bytes)) << n << " bytes";
    x = x * 1664525u + 1013904223u;  // a linear congruential generator: any bytes will do
    bytes += static_cast<char>(x >> 24);
  }
}

// ---- The TensorBoard log ----

double lf_seconds_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

TEST(TensorboardLog, WritesEachRecordAsOneEventOfScalars) {
  const std::string directory = test::scratch_dir("tensorboard_log") + "/runs/first";  // parents too
  const double before = lf_seconds_now();
  std::string file;
  {
    TensorboardLog log(directory);
    file = log.file();
    for (const auto& record : lf_records()) log.write(record);
  }
  const double after = lf_seconds_now();

  // events.out.tfevents.<10 digits>.<host>.<pid>.mpiddp, the only file in the directory.
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  std::smatch name;
  const std::string file_name = std::filesystem::path(file).filename().string();
  ASSERT_TRUE(std::regex_match(file_name, name,
                               std::regex(R"(events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.mpiddp)")))
      << file_name;
  EXPECT_EQ(name[2], std::string(host));
  EXPECT_EQ(name[3], std::to_string(::getpid()));
  EXPECT_EQ(std::filesystem::path(file).parent_path(), std::filesystem::path(directory));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(directory), {}), 1);

  const auto f = [](double x) { return static_cast<float>(x); };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<int64_t, std::vector<LfScalar>>> expected = {
      {1, {{"train/loss", f(0.5)}, {"train/lr", f(0.03)}, {"train/grad_norm", f(1.25)}}},
      {2, {{"train/loss", nan}, {"train/lr", f(0.03)}}},
      {2, {{"eval/loss", f(0.3333333333333333)}}},
      // The epoch record has no step: its epoch stands in.
      {1, {{"train/epoch_loss", f(0.39)}, {"train/samples_per_s", f(5000)}, {"eval/loss", f(0.4)},
           {"eval/accuracy", f(0.8)}}},
      // null is a NaN; new_metric is no column.
      {300, {{"eval/loss", f(1e-7)}, {"eval/accuracy", f(0.875)}, {"eval/loss_ema", nan}}},
      // 1e300 is past float's range: infinity.
      {300, {{"train/epoch_loss", -0.0f}, {"train/samples_per_s", f(4999.5)}, {"eval/loss", inf}}},
      {301, {{"train/loss", f(0.1)}, {"train/lr", 1.0f}, {"train/grad_norm", inf}, {"train/epoch_loss", f(0.2)},
             {"train/samples_per_s", 3.0f}, {"eval/loss", 4.0f}, {"eval/accuracy", 0.5f}, {"eval/loss_ema", 4.5f}}},
      // The last eval record has no scalar: no event.
  };

  const std::vector<LfEvent> events = lf_read_events(file);
  ASSERT_EQ(events.size(), 1 + expected.size());
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[0].step, 0);
  EXPECT_FALSE(events[0].has_summary);
  EXPECT_EQ(static_cast<int64_t>(events[0].wall_time), std::stoll(name[1]));  // the name's seconds
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_GE(events[i].wall_time, before) << "event " << i;
    EXPECT_LE(events[i].wall_time, after) << "event " << i;
    if (i > 0) {
      EXPECT_GE(events[i].wall_time, events[i - 1].wall_time) << "event " << i;
    }
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const LfEvent& event = events[1 + i];
    EXPECT_EQ(event.file_version, "") << "event " << 1 + i;
    EXPECT_TRUE(event.has_summary) << "event " << 1 + i;
    EXPECT_EQ(event.step, expected[i].first) << "event " << 1 + i;
    EXPECT_EQ(event.values, expected[i].second) << "event " << 1 + i;
  }
}

TEST(TensorboardLog, EachEventIsOnDiskWhenWritten) {
  TensorboardLog log(test::scratch_dir("tensorboard_flush"));
  log.write(io::Json::parse(R"({"kind":"step","epoch":1,"step":7,"loss":0.25,"lr":0.5,"time_s":0.1})"));
  const std::vector<LfEvent> events = lf_read_events(log.file());  // the log is still open
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 7);
  EXPECT_EQ(events[1].values, (std::vector<LfScalar>{{"train/loss", 0.25f}, {"train/lr", 0.5f}}));
}

TEST(TensorboardLog, TheReaderDetectsEveryCorruptedByte) {
  std::string file;
  {
    TensorboardLog log(test::scratch_dir("tensorboard_corrupt"));
    file = log.file();
    log.write(lf_records()[1]);
    log.write(lf_records()[5]);
  }
  const std::string bytes = lf_read_file(file);
  ASSERT_EQ(lf_read_tfrecords(bytes).size(), 3u);
  // Every byte in turn: the length, either CRC or the data. A CRC-32 catches every burst of
  // up to 32 flipped bits.
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0xA5);
    EXPECT_THROW(lf_read_tfrecords(bad), std::runtime_error) << "byte " << i;
  }
  EXPECT_THROW(lf_read_tfrecords(bytes.substr(0, bytes.size() - 1)), std::runtime_error);
}

// Calls `body`, which should throw an Error(kExitOutput) naming `path` and `reason`.
void lf_expect_output_error(const std::function<void()>& body, const std::string& path, const std::string& reason) {
  try {
    body();
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), kExitOutput) << message;
    EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(reason), std::string::npos) << message;
  }
}

TEST(TensorboardLog, ADirectoryThatCannotBeCreatedIsAnOutputError) {
  const std::string scratch = test::scratch_dir("tensorboard_errors");
  std::ofstream(scratch + "/plain") << "a regular file";
  lf_expect_output_error([&] { TensorboardLog log(scratch + "/plain/runs"); }, scratch + "/plain/runs",
                         "Not a directory");
  lf_expect_output_error([&] { TensorboardLog log(scratch + "/plain"); }, scratch + "/plain", "");
  lf_expect_output_error([&] { TensorboardLog log(""); }, "", "empty");
}

// Runs `body` with files limited to `bytes` (RLIMIT_FSIZE), so that a write past the limit
// fails with EFBIG as one to a full disk fails with ENOSPC (SIGXFSZ, which would end the
// process, is ignored meanwhile). Returns the Error that `body` threw, if any.
std::optional<Error> lf_with_file_size_limit(rlim_t bytes, const std::function<void()>& body) {
  rlimit old{};
  if (::getrlimit(RLIMIT_FSIZE, &old) != 0) throw std::runtime_error("getrlimit failed");
  rlimit limited = old;
  limited.rlim_cur = bytes;
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  if (::setrlimit(RLIMIT_FSIZE, &limited) != 0) throw std::runtime_error("setrlimit failed");
  std::optional<Error> error;
  try {
    body();
  } catch (const Error& e) {
    error = e;
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  return error;
}

TEST(TensorboardLog, AFailedWriteIsAnOutputError) {
  TensorboardLog log(test::scratch_dir("tensorboard_full"));
  const auto size = std::filesystem::file_size(log.file());
  const auto error = lf_with_file_size_limit(size + 8, [&] { log.write(lf_records()[1]); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), kExitOutput);
  EXPECT_NE(std::string(error->what()).find("'" + log.file() + "': File too large"), std::string::npos)
      << error->what();
}

// ---- The CSV log ----

std::vector<std::string> lf_split(const std::string& text, char separator) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == separator) parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

TEST(CsvLog, WritesFixedColumnsForStepEvalAndEpochRecords) {
  const std::string path = test::scratch_dir("csv_log") + "/log.csv";
  {
    CsvLog log(path);
    for (const auto& record : lf_records()) log.write(record);
  }
  // Empty where a record lacks the field; numbers as the JSON log writes them (1.0 stays a
  // double, 2 and 5000 are integers in the record); NaN (a double, or null) and inf by name.
  EXPECT_EQ(lf_read_file(path),
            "kind,epoch,step,loss,lr,grad_norm,eval_loss,eval_accuracy,eval_loss_ema,train_loss,time_s,samples_per_s,eval_bpb\n"
            "step,1,1,0.5,0.03,1.25,,,,,0.002,,\n"
            "step,1,2,nan,0.03,,,,,,0.0025,,\n"
            "eval,1,2,,,,0.3333333333333333,,,,,,\n"
            "epoch,1,,,,,0.4,0.8,,0.39,1.0,5000,\n"
            "eval,2,300,,,,1e-07,0.875,nan,,,,\n"
            "epoch,2,300,,,,1e+300,,,-0.0,2,4999.5,\n"
            "step,3,301,0.1,1,inf,4.0,0.5,4.5,0.2,0.001,3,\n"
            "eval,3,302,,,,,,,,,,\n");
}

TEST(CsvLog, NumbersReadBackToTheSameDouble) {
  const std::string path = test::scratch_dir("csv_round_trip") + "/log.csv";
  const double values[] = {0.1, 1.0 / 3, 2.0 / 3, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.125,
                           0.30000000000000004, -2.5e-8};
  {
    CsvLog log(path);
    for (double x : values) log.write({{"kind", "step"}, {"loss", x}});
  }
  const std::vector<std::string> lines = lf_split(lf_read_file(path), '\n');
  ASSERT_EQ(lines.size(), 1 + std::size(values) + 1);  // the header, the rows, "" after the last newline
  for (size_t i = 0; i < std::size(values); ++i) {
    const std::string cell = lf_split(lines[1 + i], ',').at(3);
    EXPECT_EQ(std::strtod(cell.c_str(), nullptr), values[i]) << cell;
    EXPECT_EQ(cell, io::Json(values[i]).dump());  // no longer than the JSON log's form
  }
}

TEST(CsvLog, EachRowIsOnDiskWhenWritten) {
  const std::string path = test::scratch_dir("csv_flush") + "/log.csv";
  CsvLog log(path);
  const std::string header =
      "kind,epoch,step,loss,lr,grad_norm,eval_loss,eval_accuracy,eval_loss_ema,train_loss,time_s,samples_per_s,eval_bpb\n";
  EXPECT_EQ(lf_read_file(path), header);  // the constructor writes the header at once
  log.write(io::Json::parse(R"({"kind":"step","epoch":1,"step":7,"loss":0.25,"lr":0.5,"time_s":0.1})"));
  EXPECT_EQ(lf_read_file(path), header + "step,1,7,0.25,0.5,,,,,,0.1,,\n");  // the log is still open
}

TEST(CsvLog, AnUnwritablePathIsAnOutputError) {
  const std::string scratch = test::scratch_dir("csv_errors");
  std::ofstream(scratch + "/plain") << "a regular file";
  lf_expect_output_error([&] { CsvLog log(scratch + "/plain/log.csv"); }, scratch + "/plain/log.csv",
                         "Not a directory");
  lf_expect_output_error([&] { CsvLog log(scratch + "/"); }, scratch + "/", "Is a directory");
  // The header is written at once, so a full disk fails in the constructor too.
  lf_expect_output_error([&] { CsvLog log("/dev/full"); }, "/dev/full", "No space left on device");
}

TEST(CsvLog, AFailedWriteIsAnOutputError) {
  const std::string path = test::scratch_dir("csv_full") + "/log.csv";
  CsvLog log(path);
  const auto size = std::filesystem::file_size(path);
  const auto error = lf_with_file_size_limit(size + 8, [&] { log.write(lf_records()[1]); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), kExitOutput);
  EXPECT_NE(std::string(error->what()).find("'" + path + "': File too large"), std::string::npos) << error->what();
}

}  // namespace
}  // namespace mpiddp::record
