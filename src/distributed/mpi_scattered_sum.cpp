#include "mpi_scattered_sum.hpp"

#include <algorithm>

#include "mpi_check.hpp"
#include "mpi_shared_memory_sum.hpp"
#include "sum_kernels.hpp"

namespace mpiddp::distributed {

// Note [the scattered sum]
// With the optimizer sharded across the leaders (one rank per node), rank r updates part r
// of the parameters only, so it needs part r of the summed gradients only. Each rank sends
// part q of its gradients to rank q and receives the other ranks' contributions to its own
// part (one MPI_Ialltoallv, nothing to itself); the owner then adds the P contributions in
// rank order, its own read where it lies, and scales. A rank sends and receives
// (P - 1)/P of the buffer: at two nodes half of it each way, at once, where Open MPI's
// non-blocking allreduce was measured to reduce to one rank and broadcast back (the whole
// buffer each way, one after the other; docs/benchmarks.md). The parameters' allgather
// after the update moves the other half. Each element is summed once, by its owner, in
// rank order, so the bits do not depend on the MPI library's algorithm; at two ranks they
// are the allreduce's (a + b = b + a), at more the sum's order may differ from it.

// Note [the allreduce as a scattered sum and a gather]
// Between nodes of one rank each (kMpi, where the shared-memory path has nothing to share),
// start_sum's allreduce is this sum followed by a gather: the buffer is cut into even parts,
// each rank sums its part as above, then sends it to every rank (MPI_Iallgatherv). A rank
// sends and receives (P - 1)/P of the buffer in each phase, as a ring allreduce does, where
// Open MPI's MPI_Iallreduce was measured to move the whole buffer to one rank and back,
// one direction after the other (docs/benchmarks.md). Both phases are posted during
// backward: the exchange when the bucket is ready, the owner's sum and the gather as soon as
// progress() finds the exchange done; MPI_Iallreduce's schedule advanced between layers too,
// but had twice the bytes to move. Every element is summed once, by its owner, in rank
// order: the bits are the same on every rank by construction and do not depend on the MPI
// library; at two ranks they are MPI_Iallreduce's (a + b = b + a, then one multiplication).
// The owner checks its sums while they are in cache (Note [the finite check in the sum] in
// mpi_shared_memory_sum.cpp), so a rank vouches for its own part only, and the trainer's
// verdict, agreed by every rank (GradientReducer::agreed_finite), covers the buffer.

struct ScatteredSum::Slot {
  void* data = nullptr;  // null once waited for
  ElementType type = ElementType::kFloat32;
  double scale = 1.0;
  size_t begin = 0, count = 0;  // this rank's part of data, in elements
  bool gathered = false;        // start_gathered: every part then goes to every rank
  bool gathering = false;       // its second phase is posted (the part summed)
  bool finite = true;           // the part this rank summed came out finite
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<double> received;  // (size - 1 parts of `count`) the peers' contributions; doubles for alignment
  std::vector<int> send_counts, send_offsets, receive_counts, receive_offsets;  // (size)
  std::vector<const void*> inputs;  // (size) the contributions to sum, in rank order
  std::vector<size_t> even_begins;  // (size + 1) start_gathered's parts
  std::vector<int> part_counts, part_offsets;  // (size) the parts, as MPI_Iallgatherv takes them
};

ScatteredSum::ScatteredSum(MPI_Comm comm) {
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_dup(comm, &gather_), "MPI_Comm_dup");
}

ScatteredSum::~ScatteredSum() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (gather_ != MPI_COMM_NULL) MPI_Comm_free(&gather_);
}

ScatteredSum::Slot& ScatteredSum::slot(int handle) { return slots_.at(static_cast<size_t>(handle)); }

size_t ScatteredSum::new_slot() {
  if (started_ == slots_.size()) slots_.emplace_back();  // vectors move without reallocating
  return started_++;
}

int ScatteredSum::start(void* data, ElementType type, double scale, const std::vector<size_t>& begins) {
  // A slot already waited for serves again, so that sums started while earlier ones are
  // still in flight (ZeRO-2's units, each started before the one two earlier is waited for)
  // hold the buffers of those in flight only, not one per sum of the step. Only here: a
  // gathered sum's slot keeps its place in start order, which wait() posts the gathers in.
  size_t i = 0;
  while (i < started_ && slots_[i].data != nullptr) ++i;
  if (i == started_) i = new_slot();
  Slot& s = slots_[i];
  s.gathered = false;
  post(s, data, type, scale, begins);
  return static_cast<int>(i);
}

int ScatteredSum::start_gathered(void* data, size_t count, ElementType type, double scale) {
  const size_t i = new_slot();
  Slot& s = slots_[i];
  s.gathered = true;
  // Part q: [q * per, min(count, (q + 1) * per)), whole cache lines but for the last.
  const size_t lines = 64 / element_bytes(type);
  const size_t parts = static_cast<size_t>(size_);
  const size_t per = ((count + parts - 1) / parts + lines - 1) / lines * lines;
  s.even_begins.resize(parts + 1);
  s.part_counts.resize(parts);
  s.part_offsets.resize(parts);
  for (size_t q = 0; q <= parts; ++q) s.even_begins[q] = std::min(count, q * per);
  for (size_t q = 0; q < parts; ++q) {
    s.part_offsets[q] = static_cast<int>(s.even_begins[q]);
    s.part_counts[q] = static_cast<int>(s.even_begins[q + 1] - s.even_begins[q]);
  }
  post(s, data, type, scale, s.even_begins);
  return static_cast<int>(i);
}

void ScatteredSum::post(Slot& s, void* data, ElementType type, double scale, const std::vector<size_t>& begins) {
  const size_t elem = element_bytes(type);
  const auto r = static_cast<size_t>(rank_);
  s.data = data;
  s.type = type;
  s.scale = scale;
  s.gathering = false;
  s.finite = true;
  s.begin = begins[r];
  s.count = begins[r + 1] - begins[r];
  mpi_count(begins.back(), "MPI_Ialltoallv(scattered sum)");  // every count and offset then fits
  // resize only grows the capacity: the first step sizes each slot, later steps reuse it.
  s.send_counts.resize(size_);
  s.send_offsets.resize(size_);
  s.receive_counts.resize(size_);
  s.receive_offsets.resize(size_);
  s.inputs.resize(size_);
  s.received.resize((static_cast<size_t>(size_ - 1) * s.count * elem + sizeof(double) - 1) / sizeof(double));
  size_t at = 0;  // where rank q's contribution lands in `received`, in elements
  for (int q = 0; q < size_; ++q) {
    const auto k = static_cast<size_t>(q);
    const bool self = q == rank_;
    s.send_offsets[k] = static_cast<int>(begins[k]);
    s.send_counts[k] = self ? 0 : static_cast<int>(begins[k + 1] - begins[k]);
    s.receive_offsets[k] = static_cast<int>(at);
    s.receive_counts[k] = self ? 0 : static_cast<int>(s.count);
    s.inputs[k] = self ? static_cast<const char*>(data) + s.begin * elem
                       : reinterpret_cast<const char*>(s.received.data()) + at * elem;
    if (!self) at += s.count;
  }
  check_mpi(MPI_Ialltoallv(data, s.send_counts.data(), s.send_offsets.data(), mpi_type_of(type),
                           s.received.data(), s.receive_counts.data(), s.receive_offsets.data(),
                           mpi_type_of(type), comm_, &s.request),
            "MPI_Ialltoallv(scattered sum)");
}

// The exchange has arrived: the owner sums its part, and a gathered sum sends it on.
void ScatteredSum::finish_exchange(Slot& s) {
  void* part = static_cast<char*>(s.data) + s.begin * element_bytes(s.type);
  s.finite = sum_slice_into_every(&part, 1, s.inputs.data(), size_, 0, s.count, s.type, s.scale);
  if (!s.gathered) return;
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s.data, s.part_counts.data(),
                            s.part_offsets.data(), mpi_type_of(s.type), gather_, &s.request),
            "MPI_Iallgatherv(summed parts)");
  s.gathering = true;
}

bool ScatteredSum::advance(int handle) {
  Slot& s = slot(handle);
  if (s.data == nullptr || s.request == MPI_REQUEST_NULL) return true;
  int done = 0;
  check_mpi(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (s.gathering) return true;  // tested only to let the gather move on
  if (done && s.gathered) finish_exchange(s);
  return done != 0;
}

bool ScatteredSum::wait(int handle) {
  // The gathers of the earlier sums are posted first: on the gather communicator, the sums
  // go in the order they were started, on every rank.
  for (int h = 0; h < handle; ++h) {
    Slot& s = slot(h);
    if (s.data == nullptr || !s.gathered || s.gathering) continue;
    check_mpi(MPI_Wait(&s.request, MPI_STATUS_IGNORE), "MPI_Wait(scattered sum)");
    finish_exchange(s);
  }
  Slot& s = slot(handle);
  if (s.data == nullptr) return true;
  if (!s.gathering) {  // a plain sum always: advance() leaves its part to be summed here
    check_mpi(MPI_Wait(&s.request, MPI_STATUS_IGNORE), "MPI_Wait(scattered sum)");
    finish_exchange(s);
  }
  if (s.gathering) check_mpi(MPI_Wait(&s.request, MPI_STATUS_IGNORE), "MPI_Wait(summed parts)");
  s.data = nullptr;
  return s.finite;
}

}  // namespace mpiddp::distributed
