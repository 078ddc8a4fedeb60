#include "mpiddp/record/trace_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/distributed/rank0_io.hpp"

namespace mpiddp::record {

namespace {

static_assert(std::is_trivially_copyable_v<TraceSpan>, "spans travel as bytes");

// One rank's trace as bytes: a header, the host and path names, then the spans as they lie
// in memory (every rank runs the same build, so the layout agrees).
struct Header {
  int64_t dropped;
  uint64_t host_bytes, path_bytes, spans;
};

std::string to_bytes(const RankTrace& t) {
  const Header h{t.dropped, t.host.size(), t.reduction_path.size(), t.spans.size()};
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes += t.host;
  bytes += t.reduction_path;
  bytes.append(reinterpret_cast<const char*>(t.spans.data()), t.spans.size() * sizeof(TraceSpan));
  return bytes;
}

RankTrace from_bytes(const std::string& bytes) {
  Header h{};
  std::memcpy(&h, bytes.data(), sizeof h);
  RankTrace t;
  t.dropped = h.dropped;
  size_t at = sizeof h;
  t.host = bytes.substr(at, h.host_bytes);
  at += h.host_bytes;
  t.reduction_path = bytes.substr(at, h.path_bytes);
  at += h.path_bytes;
  t.spans.resize(h.spans);
  std::memcpy(t.spans.data(), bytes.data() + at, h.spans * sizeof(TraceSpan));
  return t;
}

// A rank's tracks: the compute track 0, then one per reduction bucket, then one per gathered
// unit (reduce.shard "parameters"), as many as the rank's spans name.
class Tracks {
 public:
  explicit Tracks(const std::vector<TraceSpan>& spans) {
    for (const TraceSpan& s : spans) {
      if (s.kind == SpanKind::kReduction) buckets_ = std::max(buckets_, s.bucket + 1);
      if (s.kind == SpanKind::kGather) units_ = std::max(units_, s.bucket + 1);
    }
  }
  int of(const TraceSpan& s) const {
    if (s.kind == SpanKind::kReduction) return 1 + s.bucket;
    if (s.kind == SpanKind::kGather) return 1 + buckets_ + s.bucket;
    return 0;
  }
  int buckets() const { return buckets_; }
  int units() const { return units_; }

 private:
  int buckets_ = 0, units_ = 0;
};

double microseconds(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

io::Json metadata(const char* name, int pid, int tid, io::Json args) {
  io::Json e = {{"ph", "M"}, {"name", name}, {"pid", pid}};
  if (tid >= 0) e["tid"] = tid;
  e["args"] = std::move(args);
  return e;
}

}  // namespace

std::string trace_json(const std::vector<RankTrace>& ranks, const config::TraceConfig& config) {
  io::Json events = io::Json::array();
  int64_t dropped = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int pid = static_cast<int>(r);
    const RankTrace& rank = ranks[r];
    dropped += rank.dropped;
    events.push_back(metadata("process_name", pid, -1,
                              {{"name", "rank " + std::to_string(r) + " (" + rank.host + ")"}}));
    events.push_back(metadata("process_sort_index", pid, -1, {{"sort_index", pid}}));
    events.push_back(metadata("thread_name", pid, 0, {{"name", "compute"}}));
    const Tracks tracks(rank.spans);
    for (int b = 0; b < tracks.buckets(); ++b)
      events.push_back(metadata("thread_name", pid, 1 + b,
                                {{"name", "reduction bucket " + std::to_string(b)}}));
    for (int u = 0; u < tracks.units(); ++u)
      events.push_back(metadata("thread_name", pid, 1 + tracks.buckets() + u,
                                {{"name", "parameter gather unit " + std::to_string(u)}}));
    for (int tid = 0; tid <= tracks.buckets() + tracks.units(); ++tid)
      events.push_back(metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}));
    // Per track by start, and of two spans starting together the longer (enclosing) first,
    // so a reader can nest them in one pass.
    std::vector<TraceSpan> spans = rank.spans;
    std::stable_sort(spans.begin(), spans.end(), [&tracks](const TraceSpan& a, const TraceSpan& b) {
      if (tracks.of(a) != tracks.of(b)) return tracks.of(a) < tracks.of(b);
      if (a.begin_ns != b.begin_ns) return a.begin_ns < b.begin_ns;
      return a.end_ns > b.end_ns;
    });
    for (const auto& s : spans) {
      io::Json args = {{"step", s.step}};
      if (s.kind == SpanKind::kReduction) {
        args["bucket"] = s.bucket;
        args["bytes"] = s.bytes;
        args["path"] = rank.reduction_path;
      } else if (s.kind == SpanKind::kGather) {
        args["unit"] = s.bucket;
        args["bytes"] = s.bytes;
      }
      events.push_back({{"ph", "X"}, {"name", span_name(s.kind)}, {"cat", span_name(s.kind)},
                        {"pid", pid}, {"tid", tracks.of(s)}, {"ts", microseconds(s.begin_ns)},
                        {"dur", microseconds(s.end_ns - s.begin_ns)}, {"args", std::move(args)}});
    }
  }
  io::Json doc = {{"traceEvents", std::move(events)},
                  {"displayTimeUnit", "ms"},
                  {"otherData",
                   {{"producer", "mpiddp " MPIDDP_VERSION},
                    {"world_size", ranks.size()},
                    {"steps", {config.first_step, config.last_step}},
                    {"dropped_spans", dropped},
                    {"clock", "steady clock; time 0 is each rank's reading right after one "
                              "common barrier at start"}}}};
  return doc.dump() + "\n";
}

void check_trace_writable(const std::string& path) {
  const std::string probe = io::temporary_name(path);
  std::FILE* file = std::fopen(probe.c_str(), "wb");
  if (!file)
    throw Error(kExitOutput, "cannot write the trace file '" + path + "': " + std::strerror(errno) +
                                 " (is trace.path's directory there and writable?)");
  std::fclose(file);
  std::remove(probe.c_str());
}

void write_trace(distributed::Communicator& comm, const StepTrace& trace, const config::TraceConfig& config) {
  const RankTrace mine{comm.host_name(), trace.reduction_path(), trace.dropped(), trace.spans()};
  // Rank 0 alone needs them; an allgather is the interface's gather of bytes, and a trace of
  // the default 20 steps is some kilobytes per rank.
  const std::vector<std::string> all = comm.allgather_string(to_bytes(mine));
  distributed::on_rank0(comm, [&] {
    std::vector<RankTrace> ranks;
    for (const auto& bytes : all) ranks.push_back(from_bytes(bytes));
    const std::string text = trace_json(ranks, config);
    io::write_file_atomically(config.path, {{text.data(), text.size()}});
  });
}

}  // namespace mpiddp::record
