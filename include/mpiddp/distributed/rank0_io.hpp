#pragma once
// File input done once, by rank 0, for the whole job (init.weights, sampler.order,
// checkpoints): the file may exist only on rank 0's disk, and one reader is kinder to a
// shared file system. A failure on rank 0 must not leave the other ranks waiting in a
// broadcast, so its outcome is shared first: on failure every rank throws the same Error,
// marked Scope::kEveryRank, which ends the job cleanly with rank 0's message and exit code.
#include <functional>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

// Runs `work` on rank 0 only; a thrown mpiddp::Error is rethrown on every rank, kEveryRank
// (any other std::exception as an Error of kExitFailure).
void on_rank0(distributed::Communicator& comm, const std::function<void()>& work);

// Runs `work` on every rank, each on its own input (each rank's part of a checkpoint, say),
// and shares the outcomes: when any rank failed, every rank throws the lowest failing rank's
// Error, kEveryRank, so that no rank waits in the next collective for one that has left.
// Collective.
void on_every_rank(distributed::Communicator& comm, const std::function<void()>& work);

// Rank 0 produces bytes (usually a file's contents); every rank returns them.
std::vector<char> bytes_from_rank0(distributed::Communicator& comm,
                                   const std::function<std::vector<char>()>& produce);

// Runs `check` on every rank over identical inputs: the ranks fail together, so an Error
// is rethrown as Scope::kEveryRank (same code and message) and only rank 0 reports it.
template <typename F>
auto collectively(F&& check) {
  try {
    return check();
  } catch (const Error& e) {
    if (e.on_every_rank()) throw;
    throw Error(e.code(), e.what(), Scope::kEveryRank);
  }
}

}  // namespace mpiddp::distributed
