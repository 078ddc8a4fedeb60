// The worker that gathers the next step's batch (include/mpiddp/train/batch_prefetcher.hpp).
#include "mpiddp/train/batch_prefetcher.hpp"

#include <functional>
#include <utility>

#include "mpiddp/core/interrupt.hpp"

namespace mpiddp::train {

namespace {

// with_interrupts_blocked calls a plain function: what it is to run travels in this slot.
thread_local const std::function<void()>* prefetch_worker_launch = nullptr;

}  // namespace

// Note [the prefetched batch]
// Who asks: the loop (Trainer::run) asks for step k + 1's samples just before step k; step
// k's first forward_loss takes the batch of step k, asked for a step earlier, and that starts
// k + 1 on the buffers step k - 1 used. So one batch at most is gathered ahead, and no buffer
// a pass reads is ever written: the worker fills only the set the pipeline does not hold.
//
// The handshake is state_, under mutex_: kFree -> kGathering (request or take, the caller's
// thread, after writing asked_) -> kReady (the worker, after writing buffers_) -> kFree (take,
// after trading buffers_ for the caller's set). Each side writes only in its own states and
// the mutex hands the writes over; in kGathering both threads only read asked_. One
// condition variable wakes the worker, one wakes a take() that waits.
//
// What is taken: a pass takes the prefetched batch only when it holds the pass's samples in
// consecutive columns, drawn for the pass's seed and epoch: the sample indices themselves,
// compared one by one, not where they came from. That is the whole of what a gathered and
// augmented batch depends on (the dataset is read-only, and every augmentation draw is a
// function of the seed, the epoch and the sample: data/augment.hpp), so a batch taken is the
// bits a synchronous gather would give, whatever was asked for. A part of it serves a
// micro-batch (Note [a part of a held batch] in src/train/batch_buffers.cpp). A pass that
// finds nothing gathers synchronously, as with `prefetch` false: the first step of each
// epoch (asked for nowhere: simplest correct), a resumed run's first step, and deterministic
// mode's chunks, which interleave the step's samples (with more than one chunk a rank). A
// batch asked for and never taken keeps the worker's buffers, and later requests wait
// behind it: deterministic mode gathers one batch in vain, then the worker rests.
template <typename T>
BatchPrefetcher<T>::BatchPrefetcher(const data::Dataset<T>& set, data::Augmentation<T> augmentation,
                                    BatchBuffers<T> buffers)
    : set_(set), augmentation_(std::move(augmentation)), buffers_(std::move(buffers)),
      asked_(static_cast<Index>(buffers_.contents().samples.size())),
      waiting_(static_cast<Index>(buffers_.contents().samples.size())) {
  // The worker starts with the terminating signals blocked, as the compute threads do (Note
  // [no signals in the compute threads] in src/core/interrupt.cpp).
  std::exception_ptr failure;
  const std::function<void()> launch = [&] {
    try {
      worker_ = std::thread([this] { work(); });
    } catch (...) {
      failure = std::current_exception();  // with_interrupts_blocked restores the mask first
    }
  };
  prefetch_worker_launch = &launch;
  with_interrupts_blocked([](int) { (*prefetch_worker_launch)(); }, 0);
  prefetch_worker_launch = nullptr;
  if (failure) std::rethrow_exception(failure);
}

template <typename T>
BatchPrefetcher<T>::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  job_.notify_one();
  if (worker_.joinable()) worker_.join();
}

template <typename T>
void BatchPrefetcher<T>::request(const Index* samples, Index count, uint64_t seed, int64_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_ != State::kFree) {
    waiting_.assign(samples, count, seed, epoch);
    return;
  }
  asked_.assign(samples, count, seed, epoch);
  state_ = State::kGathering;
  job_.notify_one();
}

template <typename T>
bool BatchPrefetcher<T>::take(const Index* samples, Index count, uint64_t seed, int64_t epoch,
                              BatchBuffers<T>& batch) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (state_ == State::kFree || asked_.find(samples, count, seed, epoch) < 0) return false;
  done_.wait(lock, [this] { return state_ == State::kReady; });
  batch.swap(buffers_);
  state_ = State::kFree;
  ++taken_;
  // A failed gather left its contents empty (BatchBuffers::gather): nothing will match them.
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  if (waiting_.count > 0) {
    std::swap(asked_, waiting_);
    waiting_.count = 0;
    state_ = State::kGathering;
    job_.notify_one();
  }
  return true;
}

template <typename T>
void BatchPrefetcher<T>::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    job_.wait(lock, [this] { return stopping_ || state_ == State::kGathering; });
    if (stopping_) return;
    lock.unlock();
    std::exception_ptr failure;
    try {
      buffers_.gather_training(set_, asked_.samples.data(), asked_.count, augmentation_, asked_.seed, asked_.epoch);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    failure_ = failure;
    state_ = State::kReady;
    done_.notify_one();
  }
}

template class BatchPrefetcher<float>;
template class BatchPrefetcher<double>;

}  // namespace mpiddp::train
