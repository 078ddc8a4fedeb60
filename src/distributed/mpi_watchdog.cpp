#include "mpi_watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "mpi_check.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::distributed {

// Note [the watchdog]
// A rank that stalls (a hung file system, a deadlock, a stopped process) leaves every other
// rank waiting in the next collective, silently and forever. The watchdog turns that into a
// report that names the lagging ranks and the step each one is at.
//
// Every rank keeps its own progress (the step the trainer last published, how many
// collectives it has entered, whether it is inside one and since when) behind a mutex that
// the main thread takes for a few nanoseconds around each collective. A watchdog thread
// per rank wakes every 100 ms and does two things:
//   - it answers status requests from peers on a private duplicate of MPI_COMM_WORLD (the
//     "side channel"), so a rank whose main thread is stuck in computation still answers;
//   - when its own main thread has been inside one collective for longer than
//     watchdog.timeout_s, it asks every peer for its status (waiting up to 5 s for the
//     answers), and the lowest-numbered rank that is waiting in that collective prints which
//     ranks have not arrived, where they are, and for how long; then it calls MPI_Abort
//     (watchdog.action = abort) or repeats the warning every timeout (warn).
// Nothing crosses the network while every rank makes progress: the side channel carries
// messages only after a timeout. Talking to peers from a second thread needs
// MPI_THREAD_MULTIPLE; without it the report names only this rank's own wait. The side
// channel and the thread exist from MPI_Init on (MpiCommunicator's constructor), so even a
// rank stuck in setup, before it has read its config, answers; the timeout is set later.

namespace {

constexpr int kTagRequest = 1;
constexpr int kTagReplyBase = 100;  // + query number, so a late answer never matches a new query
constexpr int kReplyFields = 5;     // step, collectives, waiting, call, milliseconds in state
constexpr std::chrono::milliseconds kPoll{100};

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string describe_peer(int rank, const ProgressSnapshot& p) {
  char text[256];
  if (p.waiting)
    std::snprintf(text, sizeof text,
                  "  rank %d: waiting in a different collective, %s (collective #%lld, step "
                  "%lld) for %.1f s: the ranks' code paths diverged\n",
                  rank, collective_name(p.call), static_cast<long long>(p.collectives),
                  static_cast<long long>(p.step), p.seconds_in_state);
  else
    std::snprintf(text, sizeof text,
                  "  rank %d: at step %lld, busy outside MPI for %.1f s (after collective #%lld)\n",
                  rank, static_cast<long long>(p.step), p.seconds_in_state,
                  static_cast<long long>(p.collectives));
  return text;
}

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kNone: return "no collective";
    case Collective::kAllreduceSumFloat: return "MPI_Allreduce(float, sum)";
    case Collective::kAllreduceSumDouble: return "MPI_Allreduce(double, sum)";
    case Collective::kAllreduceMaxDouble: return "MPI_Allreduce(double, max)";
    case Collective::kAllreduceSumInt64: return "MPI_Allreduce(int64, sum)";
    case Collective::kBroadcast: return "MPI_Bcast";
    case Collective::kAllgather: return "MPI_Allgather";
    case Collective::kAllgatherStrings: return "MPI_Allgatherv(strings)";
    case Collective::kBarrier: return "MPI_Barrier";
    case Collective::kSharedWindow: return "MPI_Win_allocate_shared";
  }
  return "an unknown collective";
}

MpiWatchdog::MpiWatchdog(int rank, int size) : rank_(rank), size_(size) {
  if (size_ == 1) return;  // nobody to wait for
  // Here, right after MPI_Init, every rank is at the same point: the side channel's
  // MPI_Comm_dup (a collective) cannot be held up by a rank stuck in setup. The thread runs
  // from now on, so a rank stuck in setup still answers where it is; it reports nothing
  // until start() sets a timeout.
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  can_query_ = provided >= MPI_THREAD_MULTIPLE;
  if (can_query_) {
    MPI_Comm_dup(MPI_COMM_WORLD, &side_);
    MPI_Irecv(&request_buffer_, 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagRequest, side_, &request_recv_);
  }
  thread_ = std::thread(&MpiWatchdog::run, this);
}

MpiWatchdog::~MpiWatchdog() { stop(); }

void MpiWatchdog::publish_step(int64_t step) {
  std::lock_guard<std::mutex> lock(progress_mutex_);
  step_ = step;
}

void MpiWatchdog::enter(Collective call) {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(progress_mutex_);
  ++collectives_;
  call_ = call;
  since_ = now;
}

void MpiWatchdog::leave() {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(progress_mutex_);
  call_ = Collective::kNone;
  since_ = now;
}

ProgressSnapshot MpiWatchdog::snapshot() {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(progress_mutex_);
  return {step_, collectives_, call_ != Collective::kNone, call_, seconds_between(since_, now)};
}

void MpiWatchdog::start(double timeout_s, bool abort_job) {
  timeout_s_ = timeout_s;
  abort_job_ = abort_job;
}

void MpiWatchdog::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
  if (request_recv_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&request_recv_);
    MPI_Wait(&request_recv_, MPI_STATUS_IGNORE);
  }
  // Marks the side channel for release (implementations do not wait for the peers here), so
  // a program that makes many communicators does not run out of communicator ids.
  if (side_ != MPI_COMM_NULL) MPI_Comm_free(&side_);
}

void MpiWatchdog::run() {
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_cv_.wait_for(lock, kPoll, [this] { return stopping_; })) {
    lock.unlock();
    serve_requests();
    check_own_wait();
    lock.lock();
  }
}

void MpiWatchdog::serve_requests() {
  if (!can_query_) return;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_Test(&request_recv_, &arrived, &status);
    if (!arrived) return;
    const ProgressSnapshot s = snapshot();
    const int64_t reply[kReplyFields] = {s.step, s.collectives, s.waiting ? 1 : 0,
                                         static_cast<int64_t>(s.call),
                                         static_cast<int64_t>(s.seconds_in_state * 1000.0)};
    MPI_Send(reply, kReplyFields, MPI_INT64_T, status.MPI_SOURCE,
             kTagReplyBase + static_cast<int>(request_buffer_), side_);
    MPI_Irecv(&request_buffer_, 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagRequest, side_, &request_recv_);
  }
}

void MpiWatchdog::check_own_wait() {
  const double timeout_s = timeout_s_;
  if (timeout_s <= 0.0) return;  // off, or not configured yet
  const ProgressSnapshot mine = snapshot();
  if (!mine.waiting || mine.seconds_in_state < timeout_s) return;
  if (mine.collectives == reported_collective_ && Clock::now() < next_report_) return;
  report(mine);
}

void MpiWatchdog::report(const ProgressSnapshot& mine) {
  std::vector<ProgressSnapshot> peers(static_cast<size_t>(size_));
  std::vector<char> answered(static_cast<size_t>(size_), 0);
  const double answer_wait_s = 5.0;
  const double timeout_s = timeout_s_;
  const bool abort_job = abort_job_;
  if (can_query_) {
    static int64_t query = 0;
    query = (query + 1) % 30000;
    std::vector<MPI_Request> sends(size_, MPI_REQUEST_NULL), recvs(size_, MPI_REQUEST_NULL);
    std::vector<int64_t> replies(static_cast<size_t>(size_) * kReplyFields, 0);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Isend(&query, 1, MPI_INT64_T, r, kTagRequest, side_, &sends[r]);
      MPI_Irecv(&replies[static_cast<size_t>(r) * kReplyFields], kReplyFields, MPI_INT64_T, r,
                kTagReplyBase + static_cast<int>(query), side_, &recvs[r]);
    }
    // Keep answering while we wait: the peers may be asking us at the same moment.
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(answer_wait_s));
    int pending = size_ - 1;
    while (pending > 0 && Clock::now() < deadline) {
      serve_requests();
      for (int r = 0; r < size_; ++r) {
        if (recvs[r] == MPI_REQUEST_NULL) continue;
        int done = 0;
        MPI_Test(&recvs[r], &done, MPI_STATUS_IGNORE);
        if (!done) continue;
        const int64_t* f = &replies[static_cast<size_t>(r) * kReplyFields];
        peers[r] = {f[0], f[1], f[2] != 0, static_cast<Collective>(f[3]),
                    static_cast<double>(f[4]) / 1000.0};
        answered[r] = 1;
        --pending;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (int r = 0; r < size_; ++r) {
      if (recvs[r] != MPI_REQUEST_NULL) {
        MPI_Cancel(&recvs[r]);
        MPI_Wait(&recvs[r], MPI_STATUS_IGNORE);
      }
      if (sends[r] != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&sends[r], &done, MPI_STATUS_IGNORE);
        if (!done) MPI_Request_free(&sends[r]);
      }
    }
  }
  auto with_me = [&](int r) {
    return answered[r] && peers[r].waiting && peers[r].collectives == mine.collectives &&
           peers[r].call == mine.call;
  };
  reported_collective_ = mine.collectives;
  next_report_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(timeout_s));
  // One report per stall: the lowest-numbered rank waiting in this collective speaks.
  for (int r = 0; r < rank_; ++r)
    if (with_me(r)) return;

  char head[320];
  std::snprintf(head, sizeof head,
                "rank %d: watchdog: waited %.1f s in %s (collective #%lld, step %lld), longer "
                "than watchdog.timeout_s = %g; ranks that have not arrived:\n",
                rank_, mine.seconds_in_state, collective_name(mine.call),
                static_cast<long long>(mine.collectives), static_cast<long long>(mine.step),
                timeout_s);
  std::string text = head;
  std::string waiting = std::to_string(rank_);
  int lagging = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (with_me(r)) {
      waiting += ", " + std::to_string(r);
    } else if (answered[r]) {
      text += describe_peer(r, peers[r]);
      ++lagging;
    } else {
      char line[200];
      std::snprintf(line, sizeof line,
                    can_query_ ? "  rank %d: no answer within %.0f s (process stopped, or its "
                                 "MPI progress is blocked)\n"
                               : "  rank %d: unknown (%.0f s; the MPI library lacks "
                                 "MPI_THREAD_MULTIPLE, so the watchdog cannot ask peers)\n",
                    r, answer_wait_s);
      text += line;
      ++lagging;
    }
  }
  if (lagging == 0) text += "  none: every rank is waiting in this collective (the MPI library "
                            "or the network is stuck)\n";
  text += "  ranks waiting in this collective: " + waiting + "\n";
  text += abort_job ? "  ending the job (watchdog.action = abort)\n"
                     : "  still waiting (watchdog.action = warn)\n";
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  if (abort_job) distributed::abort_job(kExitWatchdog);
}

}  // namespace mpiddp::distributed
