#pragma once
// The next step's batch, gathered and augmented on a worker thread while the current step
// computes (`prefetch`, docs/config.md): one thread for the prefetcher's life, and a second
// set of batch buffers, allocated once, which it fills and then trades with the pipeline's
// (Note [the prefetched batch] in src/train/batch_prefetcher.cpp). The worker reads the
// dataset and writes its own buffers, nothing else: it never calls MPI and never touches
// the model.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "mpiddp/core/types.hpp"
#include "mpiddp/data/augment.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/train/batch_buffers.hpp"

namespace mpiddp::train {

template <typename T>
class BatchPrefetcher {
 public:
  // set: the training set, which outlives the prefetcher; augmentation: the worker's own
  // (with its own scratch); buffers: the set the worker fills, shaped as the one it trades
  // with. Starts the worker.
  BatchPrefetcher(const data::Dataset<T>& set, data::Augmentation<T> augmentation, BatchBuffers<T> buffers);
  // Stops the worker once the batch it is on is done.
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Asks for training samples samples[0, count) augmented for seed and epoch: the worker
  // gathers them at once when its buffers are free, else once take() has handed over the
  // batch they hold; a request still waiting is replaced. Copies the indices; allocates nothing.
  void request(const Index* samples, Index count, uint64_t seed, int64_t epoch);
  // When the batch asked for holds samples[0, count) drawn for seed and epoch in consecutive
  // columns: waits for the worker to finish it, trades it for `batch` (whose samples no pass
  // reads any more), starts the waiting request on the buffers handed over, and returns true;
  // rethrows what the worker's gather threw. Otherwise false, and nothing changes.
  bool take(const Index* samples, Index count, uint64_t seed, int64_t epoch, BatchBuffers<T>& batch);
  // The batches take() has handed over.
  int64_t taken() const { return taken_; }

 private:
  enum class State {
    kFree,       // buffers_ holds nothing asked for: the caller's thread may write asked_
    kGathering,  // the worker fills buffers_ with asked_; both threads read asked_
    kReady,      // buffers_ holds asked_ (or failure_): for take()
  };
  void work();

  const data::Dataset<T>& set_;
  data::Augmentation<T> augmentation_;  // the worker's
  BatchBuffers<T> buffers_;             // (capacity) the batch the worker fills
  BatchContents asked_;                 // (capacity) what buffers_ holds, kGathering and kReady
  BatchContents waiting_;               // (capacity) the request for when buffers_ is free; count 0: none
  std::exception_ptr failure_;          // what the last gather threw, until take()
  State state_ = State::kFree;
  bool stopping_ = false;
  int64_t taken_ = 0;
  std::mutex mutex_;              // guards the state and the hand-overs (the Note)
  std::condition_variable job_;   // the worker waits for a batch to gather, or the stop
  std::condition_variable done_;  // take() waits for the batch
  std::thread worker_;            // started by the constructor, joined by the destructor
};

}  // namespace mpiddp::train
