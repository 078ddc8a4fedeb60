#include "mpiddp/core/interrupt.hpp"

#include <atomic>
#include <csignal>

namespace mpiddp {
namespace {

// Lock-free, so both the handler's store and the pollers' loads are async-signal-safe.
std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record_signal(int signal_number) {
  int expected = 0;
  first_signal.compare_exchange_strong(expected, signal_number);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = record_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a read or write interrupted by the signal goes on; the flag is polled later.
  action.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaction(s, &action, nullptr);
}

bool interrupt_requested() { return first_signal.load(std::memory_order_relaxed) != 0; }

int interrupt_signal() { return first_signal.load(std::memory_order_relaxed); }

void clear_interrupt() { first_signal.store(0, std::memory_order_relaxed); }

}  // namespace mpiddp
