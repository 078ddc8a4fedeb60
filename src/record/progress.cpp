#include "mpiddp/record/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <string_view>

namespace mpiddp::record {

char* format_duration(double seconds, char* out, size_t size) {
  if (!std::isfinite(seconds) || seconds < 0.0) {
    std::snprintf(out, size, "--:--");
    return out;
  }
  const auto total = static_cast<long long>(seconds + 0.5);
  const long long h = total / 3600, m = total / 60 % 60, s = total % 60;
  if (h > 0) std::snprintf(out, size, "%lld:%02lld:%02lld", h, m, s);
  else std::snprintf(out, size, "%lld:%02lld", m, s);
  return out;
}

char* format_progress(const ProgressState& p, char* out, size_t size) {
  char elapsed[24], eta[24];
  const double remaining = p.step > 0 ? p.elapsed_s / static_cast<double>(p.step) *
                                            static_cast<double>(p.steps - p.step)
                                      : -1.0;
  std::snprintf(out, size, "epoch %lld/%lld  step %lld/%lld  %.0f samples/s  loss %.6g  elapsed %s  ETA %s",
                static_cast<long long>(p.epoch), static_cast<long long>(p.epochs),
                static_cast<long long>(p.step), static_cast<long long>(p.steps), p.samples_per_s,
                p.loss, format_duration(p.elapsed_s, elapsed, sizeof elapsed),
                format_duration(remaining, eta, sizeof eta));
  return out;
}

ProgressLine::Mode ProgressLine::mode_for(std::FILE* stream, bool quiet, bool is_rank0,
                                          const char* requested) {
  if (quiet || !is_rank0) return Mode::kOff;
  // Open MPI's mpirun hands its ranks a pipe for stderr even when mpirun itself writes to a
  // terminal, so a rank cannot see the terminal: launch/mpirun.sh looks and says so through
  // MPIDDP_PROGRESS.
  const std::string_view want = requested ? requested : "";
  if (want == "terminal") return Mode::kTerminal;
  if (want == "plain") return Mode::kPlain;
  if (want == "off") return Mode::kOff;
  return isatty(fileno(stream)) ? Mode::kTerminal : Mode::kPlain;
}

ProgressLine::ProgressLine(std::FILE* stream, Mode mode, int64_t epochs, int64_t steps,
                           int64_t samples_per_step, double interval_s)
    : stream_(stream), mode_(mode), samples_per_step_(samples_per_step), interval_s_(interval_s) {
  state_.epochs = epochs;
  state_.steps = steps;
}

ProgressLine::ProgressLine(std::FILE* stream, Mode mode, int64_t epochs, int64_t steps,
                           int64_t samples_per_step)
    // A terminal redraws 4 times a second: readable, and cheap next to a step. A log file
    // gets a line every 10 s: enough to see a job is alive without flooding it.
    : ProgressLine(stream, mode, epochs, steps, samples_per_step, mode == Mode::kTerminal ? 0.25 : 10.0) {}

bool ProgressLine::update(int64_t epoch, int64_t step, double loss, double now_s) {
  if (mode_ == Mode::kOff) return false;
  state_.epoch = epoch;
  state_.step = step;
  state_.loss = loss;
  if (now_s - last_write_s_ < interval_s_) return false;
  write(now_s, false);
  return true;
}

void ProgressLine::clear() {
  if (mode_ != Mode::kTerminal || !on_screen_) return;
  std::fputs("\r\033[K", stream_);  // carriage return, erase to the end of the line
  std::fflush(stream_);
  on_screen_ = false;
}

void ProgressLine::finish(double now_s) {
  if (mode_ == Mode::kOff || (mode_ == Mode::kPlain && !written_)) return;
  write(now_s, true);
}

void ProgressLine::write(double now_s, bool final_line) {
  state_.elapsed_s = now_s;
  state_.samples_per_s =
      now_s > 0.0 ? static_cast<double>(state_.step * samples_per_step_) / now_s : 0.0;
  format_progress(state_, line_, sizeof line_);
  if (mode_ == Mode::kTerminal)
    std::fprintf(stream_, "\r\033[K%s%s", line_, final_line ? "\n" : "");
  else
    std::fprintf(stream_, "progress: %s\n", line_);
  std::fflush(stream_);
  on_screen_ = mode_ == Mode::kTerminal && !final_line;
  written_ = true;
  last_write_s_ = now_s;
}

}  // namespace mpiddp::record
