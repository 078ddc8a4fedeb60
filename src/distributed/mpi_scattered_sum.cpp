#include "mpi_scattered_sum.hpp"

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

struct ScatteredSum::Slot {
  void* data = nullptr;  // null once waited for
  ElementType type = ElementType::kFloat32;
  double scale = 1.0;
  size_t begin = 0, count = 0;  // this rank's part of data, in elements
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<double> received;  // (size - 1 parts of `count`) the peers' contributions; doubles for alignment
  std::vector<int> send_counts, send_offsets, receive_counts, receive_offsets;  // (size)
  std::vector<const void*> inputs;  // (size) the contributions to sum, in rank order
};

ScatteredSum::ScatteredSum(MPI_Comm comm) {
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
}

ScatteredSum::~ScatteredSum() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

ScatteredSum::Slot& ScatteredSum::slot(int handle) { return slots_.at(static_cast<size_t>(handle)); }

int ScatteredSum::start(void* data, ElementType type, double scale, const std::vector<size_t>& begins) {
  if (started_ == slots_.size()) slots_.emplace_back();  // vectors move without reallocating
  Slot& s = slots_[started_];
  const size_t elem = element_bytes(type);
  const auto r = static_cast<size_t>(rank_);
  s.data = data;
  s.type = type;
  s.scale = scale;
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
  return static_cast<int>(started_++);
}

bool ScatteredSum::advance(int handle) {
  Slot& s = slot(handle);
  if (s.data == nullptr || s.request == MPI_REQUEST_NULL) return true;
  int done = 0;
  check_mpi(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

void ScatteredSum::wait(int handle) {
  Slot& s = slot(handle);
  if (s.data == nullptr) return;
  check_mpi(MPI_Wait(&s.request, MPI_STATUS_IGNORE), "MPI_Wait(scattered sum)");
  const size_t elem = element_bytes(s.type);
  sum_slice(static_cast<char*>(s.data) + s.begin * elem, s.inputs.data(), size_, 0, s.count, s.type,
            s.scale);
  s.data = nullptr;
}

}  // namespace mpiddp::distributed
