#include "mpiddp/distributed/flight_recorder.hpp"

#include <chrono>
#include <filesystem>
#include <string>

#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::distributed {

// Note [the flight recorder]
// The watchdog says which ranks have not arrived in a collective; the flight recorder says
// what each rank had been doing. Every rank keeps its last 64 collectives (number, kind,
// payload bytes, step, start and end) in a fixed ring that MpiWatchdog::enter/leave fill
// under the mutex they already take: no allocation, a handful of stores per collective (the
// cost is measured in docs/reliability.md), so the recorder is always on.
//
// The ring is written, as `<log>.flight.rank<R>.json` or into debug.flight_dir, by whichever
// thread can when something goes wrong:
//   - the watchdog thread, when this rank's own wait passes watchdog.timeout_s;
//   - the watchdog thread, when a peer's watchdog asks for this rank's status (peers ask
//     only after a timeout, so a rank whose main thread is stuck outside MPI writes too);
//   - the aborting thread, in abort_job, before MPI_Abort; it first asks every peer's
//     watchdog (side channel, no reply) to write its own, and the 200 ms abort_job waits
//     anyway lets them;
//   - the watchdog thread, when SIGTERM, SIGINT or SIGUSR1 arrived (core/interrupt.hpp),
//     since the main thread may be stuck in a collective that never completes (Open MPI's
//     mpirun sends SIGTERM to the surviving ranks when one dies). Never the handler itself.
// The copy is taken under the progress mutex, so the main thread cannot change the ring
// halfway through it; the file is written atomically (a reader never sees half of one), by
// a short-lived thread that the caller waits for at most 2 s, so that a hung file system
// (itself a common cause of hangs) cannot hold up the watchdog's report or MPI_Abort.
// `mpiddp flight` (src/analysis/flight.cpp) reads the files of all ranks and aligns them
// by collective number, which is the same on every rank for the same collective.

namespace {

struct KindName {
  Collective kind;
  const char* key;
  const char* mpi;
};

// One table for both names, so they cannot drift apart.
constexpr KindName kKinds[] = {
    {Collective::kNone, "none", "no collective"},
    {Collective::kAllreduceSumFloat, "allreduce_sum_float", "MPI_Allreduce(float, sum)"},
    {Collective::kAllreduceSumDouble, "allreduce_sum_double", "MPI_Allreduce(double, sum)"},
    {Collective::kAllreduceMaxDouble, "allreduce_max_double", "MPI_Allreduce(double, max)"},
    {Collective::kBroadcast, "broadcast", "MPI_Bcast"},
    {Collective::kAllgather, "allgather", "MPI_Allgather"},
    {Collective::kAllgatherStrings, "allgather_strings", "MPI_Allgatherv(strings)"},
    {Collective::kBarrier, "barrier", "MPI_Barrier"},
    {Collective::kSharedWindow, "shared_window", "MPI_Win_allocate_shared"},
    {Collective::kAllreduceSumInt64, "allreduce_sum_int64", "MPI_Allreduce(int64, sum)"},
    {Collective::kNodeAllgather, "node_allgather", "MPI_Allgatherv(within a node)"},
    {Collective::kNodeGather, "node_gather", "MPI_Gatherv(within a node)"},
    {Collective::kBroadcastAmongNodes, "broadcast_among_nodes", "MPI_Bcast(among nodes)"},
    {Collective::kScatteredSum, "scattered_sum", "MPI_Ialltoallv(scattered sum)"},
    {Collective::kWorldAllgather, "world_allgather", "MPI_Allgatherv(world parts)"},
    {Collective::kWorldGather, "world_gather", "MPI_Gatherv(world parts)"},
    {Collective::kUnitGather, "unit_gather", "MPI_Iallgatherv(a unit's parameters)"},
};

const KindName* find_kind(Collective c) {
  for (const auto& k : kKinds)
    if (k.kind == c) return &k;
  return nullptr;
}

}  // namespace

const char* collective_name(Collective c) {
  const KindName* k = find_kind(c);
  return k ? k->mpi : "an unknown collective";
}

const char* collective_key(Collective c) {
  const KindName* k = find_kind(c);
  return k ? k->key : "unknown";
}

Collective collective_from_key(std::string_view key) {
  for (const auto& k : kKinds)
    if (key == k.key) return k.kind;
  return Collective::kNone;
}

std::vector<FlightEntry> FlightRing::entries() const {
  const int64_t held = recorded_ < kCapacity ? recorded_ : kCapacity;
  std::vector<FlightEntry> out;
  out.reserve(static_cast<size_t>(held));
  for (int64_t i = recorded_ - held; i < recorded_; ++i)
    out.push_back(entries_[static_cast<size_t>(i % kCapacity)]);
  return out;
}

std::string flight_file_path(const std::string& flight_dir, const std::string& log_path, int rank) {
  const std::string name = "flight.rank" + std::to_string(rank) + ".json";
  if (!flight_dir.empty()) return (std::filesystem::path(flight_dir) / name).string();
  if (!log_path.empty()) return log_path + "." + name;
  return "";
}

std::string flight_json(const FlightDump& dump, int64_t now_ns, int64_t now_us) {
  const auto wall_us = [&](int64_t t_ns) { return now_us - (now_ns - t_ns) / 1000; };
  io::Json head = {{"format", "mpiddp-flight-1"}, {"rank", dump.rank},     {"size", dump.size},
                   {"reason", dump.reason},       {"written_us", now_us}, {"step", dump.step}};
  std::string text = head.dump();
  text.pop_back();  // the closing brace: the entries follow, one per line
  text += ",\"entries\":[";
  for (size_t i = 0; i < dump.entries.size(); ++i) {
    const FlightEntry& e = dump.entries[i];
    const io::Json entry = {{"seq", e.seq},
                            {"kind", collective_key(e.kind)},
                            {"bytes", e.bytes},
                            {"step", e.step},
                            {"start_us", wall_us(e.start_ns)},
                            {"end_us", e.end_ns < 0 ? io::Json(nullptr) : io::Json(wall_us(e.end_ns))}};
    text += (i == 0 ? "\n" : ",\n") + entry.dump();
  }
  text += "\n]}\n";
  return text;
}

void write_flight_file(const std::string& path, const FlightDump& dump) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ignored;  // a directory that cannot be made fails the write, which says so
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::string text = flight_json(dump, now_ns, now_us);
  io::write_file_atomically(path, {{text.data(), text.size()}});
}

}  // namespace mpiddp::distributed
