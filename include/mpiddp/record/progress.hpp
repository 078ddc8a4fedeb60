#pragma once
// The progress line rank 0 shows on stderr during training: epoch, step/steps, samples/s,
// the current loss, elapsed time and ETA. On a terminal one line is redrawn in place at
// most a few times a second; otherwise (a pipe, a Slurm output file) a plain line is
// written every so often. It never goes into the JSONL log, and --quiet turns it off.
// Nothing here allocates after construction: update() runs inside the step loop.
#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace mpiddp::record {

struct ProgressState {
  int64_t epoch = 0, epochs = 0;      // 1-based current epoch, total
  int64_t step = 0, steps = 0;        // optimizer steps done, total
  double samples_per_s = 0.0;         // global samples per second so far
  double loss = 0.0;                  // the last step's global loss
  double elapsed_s = 0.0;
};

// "1:05" (m:ss), "1:02:03" (h:mm:ss), "--:--" for a negative or non-finite time.
// Writes at most `size` bytes including the terminating NUL; returns out.
char* format_duration(double seconds, char* out, size_t size);

// "epoch 2/4  step 37/80  12345 samples/s  loss 0.12345  elapsed 0:12  ETA 0:14".
// The ETA assumes the remaining steps go at the average speed so far ("--:--" before the
// first step). Returns out.
char* format_progress(const ProgressState& state, char* out, size_t size);

class ProgressLine {
 public:
  enum class Mode { kOff, kTerminal, kPlain };
  // kOff when quiet or not rank 0. Otherwise `requested` decides when it is "terminal",
  // "plain" or "off" (the MPIDDP_PROGRESS variable, set by launch/mpirun.sh), and else
  // whether `stream` is a terminal.
  static Mode mode_for(std::FILE* stream, bool quiet, bool is_rank0, const char* requested);

  // interval_s: the least time between two lines (the terminal refresh period, or the
  // period of the plain lines).
  ProgressLine(std::FILE* stream, Mode mode, int64_t epochs, int64_t steps, int64_t samples_per_step,
               double interval_s);
  // Default intervals: 0.25 s on a terminal, 10 s for plain lines.
  ProgressLine(std::FILE* stream, Mode mode, int64_t epochs, int64_t steps, int64_t samples_per_step);
  // Erases a terminal line left showing (a run ended by an error), so the message that
  // follows starts on a clean line.
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // After each optimizer step. now_s: seconds since training started. Writes only when
  // interval_s has passed since the last line. Returns whether it wrote.
  bool update(int64_t epoch, int64_t step, double loss, double now_s);
  // Before other output on the terminal (the epoch table): erases the line in place.
  void clear();
  // At the end: the final figures, then a newline (terminal), or a last plain line if any
  // was written before.
  void finish(double now_s);

 private:
  void write(double now_s, bool final_line);

  std::FILE* stream_;
  Mode mode_;
  int64_t samples_per_step_;
  double interval_s_;
  ProgressState state_;
  double last_write_s_ = 0.0;
  bool written_ = false;
  bool on_screen_ = false;  // a terminal line is showing
  char line_[192] = {};
};

}  // namespace mpiddp::record
