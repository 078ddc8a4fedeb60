#include "mpi_compressed_sum.hpp"

#include <algorithm>

#include "mpi_check.hpp"
#include "mpiddp/distributed/bf16.hpp"

namespace mpiddp::distributed {

// Note [bf16 between nodes]
// With reduce.compress "bf16" the sum between nodes moves bfloat16, half the bytes of
// float32, as PyTorch's bf16_compress_hook does. Unlike that hook (an allreduce on bf16
// data, rounded to bf16 at every hop of the MPI/NCCL algorithm, with a result that depends
// on the algorithm's order), the sum itself is done in float32, in a fixed order:
//   1. every rank rounds its buffer (its node's partial sum) to bf16 and sends part q of
//      it to rank q (MPI_Ialltoallv): a reduce-scatter, each rank owns one part;
//   2. the owner of a part sums the P bf16 contributions widened to float32, in rank
//      order, multiplies by the scale, and rounds once to bf16;
//   3. the owners' parts go to every rank (MPI_Iallgatherv) and are widened into the buffer.
// Each element is rounded twice: once per contribution (|error| <= 2^-8 |x_r| each) and
// once for the result (<= 2^-8 |sum|); the float32 sum adds P * 2^-24 of the magnitudes.
// Every rank widens the same bf16 bits, so replicas stay bit-identical. Bytes a rank sends:
// 2 (P-1)/P * 2 B per element, against 2 (P-1)/P * 4 B for a ring allreduce of float32.
// MPI has no bf16 type: the bits travel as MPI_UINT16_T and are never summed by MPI.
// Phase 2 of one sum may be posted while phase 1 of the next is under way, on one rank
// and not yet on another; each phase has its own communicator, on which the sums are
// posted in bucket order on every rank, so MPI matches them correctly.

struct CompressedSum::Slot {
  float* data = nullptr;   // null once waited for
  size_t count = 0;
  float scale = 1.0f;
  bool gathering = false;  // phase 2 posted
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<uint16_t> wire;      // (count) this rank's bf16, then the result
  std::vector<uint16_t> received;  // (size, part) the contributions to this rank's part
  std::vector<int> counts, offsets;  // (size) part q: [offsets[q], offsets[q] + counts[q])
  std::vector<int> part_counts, part_offsets;  // (size) what rank q sends us: counts[rank] at q * counts[rank]
};

CompressedSum::CompressedSum(MPI_Comm comm) {
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
  check_mpi(MPI_Comm_dup(comm, &scatter_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_dup(comm, &gather_), "MPI_Comm_dup");
}

CompressedSum::~CompressedSum() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (scatter_ != MPI_COMM_NULL) MPI_Comm_free(&scatter_);
  if (gather_ != MPI_COMM_NULL) MPI_Comm_free(&gather_);
}

CompressedSum::Slot& CompressedSum::slot(int handle) { return slots_.at(static_cast<size_t>(handle)); }

int CompressedSum::start(float* data, size_t count, double scale) {
  if (started_ == slots_.size()) slots_.emplace_back();  // vectors move without reallocating
  Slot& s = slots_[started_];
  s.data = data;
  s.count = count;
  s.scale = static_cast<float>(scale);
  s.gathering = false;
  // Part q: [q * per, min(count, (q + 1) * per)). MPI counts are int; buckets are far below.
  const size_t per = (count + static_cast<size_t>(size_) - 1) / static_cast<size_t>(size_);
  s.counts.resize(size_);
  s.offsets.resize(size_);
  for (int q = 0; q < size_; ++q) {
    const size_t begin = std::min(count, per * static_cast<size_t>(q));
    const size_t end = std::min(count, begin + per);
    s.offsets[q] = static_cast<int>(begin);
    s.counts[q] = static_cast<int>(end - begin);
  }
  const int mine = s.counts[rank_];
  s.part_counts.assign(size_, mine);
  s.part_offsets.resize(size_);
  for (int q = 0; q < size_; ++q) s.part_offsets[q] = q * mine;
  // resize only grows the capacity: the first step sizes each slot, later steps reuse it.
  s.wire.resize(count);
  s.received.resize(static_cast<size_t>(size_) * static_cast<size_t>(mine));
  compress_bf16(data, s.wire.data(), count);
  check_mpi(MPI_Ialltoallv(s.wire.data(), s.counts.data(), s.offsets.data(), MPI_UINT16_T,
                           s.received.data(), s.part_counts.data(), s.part_offsets.data(),
                           MPI_UINT16_T, scatter_, &s.request),
            "MPI_Ialltoallv(bf16 parts)");
  return static_cast<int>(started_++);
}

void CompressedSum::finish_phase_one(Slot& s) {
  const int mine = s.counts[rank_];
  uint16_t* part = s.wire.data() + s.offsets[rank_];
  sum_bf16_parts(s.received.data(), size_, static_cast<size_t>(mine), static_cast<size_t>(mine),
                 s.scale, part);
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s.wire.data(), s.counts.data(),
                            s.offsets.data(), MPI_UINT16_T, gather_, &s.request),
            "MPI_Iallgatherv(bf16 parts)");
  s.gathering = true;
}

bool CompressedSum::advance(int handle) {
  Slot& s = slot(handle);
  if (s.gathering || s.data == nullptr) return true;
  int done = 0;
  check_mpi(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (done) finish_phase_one(s);
  return done != 0;
}

void CompressedSum::wait(int handle) {
  // Phase 2 of the earlier sums is posted first: on the gather communicator, the sums go
  // in the order they were started, on every rank.
  for (int h = 0; h <= handle; ++h) {
    Slot& s = slot(h);
    if (s.data == nullptr || s.gathering) continue;
    check_mpi(MPI_Wait(&s.request, MPI_STATUS_IGNORE), "MPI_Wait(bf16 parts)");
    finish_phase_one(s);
  }
  Slot& s = slot(handle);
  if (s.data == nullptr) return;
  check_mpi(MPI_Wait(&s.request, MPI_STATUS_IGNORE), "MPI_Wait(bf16 result)");
  decompress_bf16(s.wire.data(), s.data, s.count);
  s.data = nullptr;
}

}  // namespace mpiddp::distributed
