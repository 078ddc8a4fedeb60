#pragma once
// The flight recorder: every rank's last 64 collectives, written to a file when the job
// hangs, aborts or is signalled, so that `mpiddp flight` can say which rank was where.
// See Note [the flight recorder] in src/distributed/flight_recorder.cpp and
// docs/reliability.md. MPI-free: the ring and its file are plain data; MpiWatchdog fills the
// ring and decides when to write it.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mpiddp::distributed {

// The collectives MpiCommunicator makes, by number, so a rank can tell another which one
// it is waiting in (the number travels in the watchdog's status reply) and the flight file
// can name it.
enum class Collective : int64_t {
  kNone = 0,
  kAllreduceSumFloat,
  kAllreduceSumDouble,
  kAllreduceMaxDouble,
  kBroadcast,
  kAllgather,
  kAllgatherStrings,
  kBarrier,
  kSharedWindow,  // MPI_Win_allocate_shared: the node's ranks create a window together
  kAllreduceSumInt64,  // deterministic mode's fixed-point sums (appended: peers exchange these values)
  kNodeAllgather,      // reduce.shard_optimizer: the updated parameter parts, within a node
  kNodeGather,         // reduce.shard_optimizer: the optimizer state parts, for a checkpoint
  kBroadcastAmongNodes,  // reduce.shard_optimizer: a resync's optimizer state parts
  kScatteredSum,       // reduce.shard_optimizer across the leaders: the gradients' reduce-scatter
  kWorldAllgather,     // reduce.shard_optimizer across the leaders: the updated parameter parts
  kWorldGather,        // reduce.shard_optimizer across the leaders: the state parts, for a checkpoint
  kUnitGather,         // reduce.shard "parameters": a unit's parameters gathered from the parts
};
// "MPI_Allreduce(float, sum)": the MPI call, for the watchdog's report.
const char* collective_name(Collective c);
// "allreduce_sum_float": the stable name in flight files.
const char* collective_key(Collective c);
// The inverse of collective_key; kNone for a name that is not one.
Collective collective_from_key(std::string_view key);

// One collective as this rank saw it. Times are steady-clock nanoseconds in the ring and
// are turned into wall-clock microseconds only when the file is written.
struct FlightEntry {
  int64_t seq = 0;       // 1-based number of the collective on this rank (the watchdog's count)
  Collective kind = Collective::kNone;
  int64_t bytes = 0;     // the payload: the same on every rank for a matching collective
  int64_t step = 0;      // the step the trainer had published when it began
  int64_t start_ns = 0;  // steady clock
  int64_t end_ns = -1;   // steady clock; -1 while this rank is inside it
};

// A fixed ring of the last kCapacity collectives: nothing allocated, two stores per call.
// Not synchronised: MpiWatchdog guards it with its progress mutex.
class FlightRing {
 public:
  static constexpr int kCapacity = 64;
  void enter(int64_t seq, Collective kind, int64_t bytes, int64_t step, int64_t now_ns) {
    FlightEntry& e = entries_[static_cast<size_t>(recorded_ % kCapacity)];
    e = {seq, kind, bytes, step, now_ns, -1};
    ++recorded_;
  }
  // Closes the newest entry (collectives do not nest).
  void leave(int64_t now_ns) {
    if (recorded_ > 0) entries_[static_cast<size_t>((recorded_ - 1) % kCapacity)].end_ns = now_ns;
  }
  int64_t recorded() const { return recorded_; }
  // The entries held, oldest first (at most kCapacity).
  std::vector<FlightEntry> entries() const;

 private:
  std::array<FlightEntry, kCapacity> entries_{};
  int64_t recorded_ = 0;
};

// What one rank writes: its ring and where it stood when the file was written.
struct FlightDump {
  int rank = 0;
  int size = 1;
  int64_t step = 0;         // the step last published
  std::string reason;       // "watchdog", "abort (exit code 7)", "signal 15", "peer watchdog"
  std::vector<FlightEntry> entries;  // oldest first
};

// The file of one rank: `<flight_dir>/flight.rank<R>.json` when flight_dir is set, else
// `<log_path>.flight.rank<R>.json`, else "" (nowhere to write).
std::string flight_file_path(const std::string& flight_dir, const std::string& log_path, int rank);

// The dump as JSON text (docs/log-format.md, "Flight recorder files"). now_ns (steady) and
// now_us (wall clock, microseconds since the Unix epoch) are one instant, to turn the ring's
// steady times into wall-clock ones that can be compared across ranks.
std::string flight_json(const FlightDump& dump, int64_t now_ns, int64_t now_us);

// Writes flight_json atomically to path (its directory created if missing); throws
// Error(kExitOutput) naming the file when it cannot.
void write_flight_file(const std::string& path, const FlightDump& dump);

}  // namespace mpiddp::distributed
