#pragma once
// Pins the calling thread to one core, for the bench programs that time two cores at once
// (sum_bound, update_bound). False when the system refuses (a cpuset without that core):
// the caller says so, since unpinned threads may share a core and time something else.
#include <pthread.h>
#include <sched.h>

inline bool pin_this_thread(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}
