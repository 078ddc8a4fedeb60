// check_loss RUN.jsonl FACTOR: the run finished and its last epoch's eval_loss is below
// FACTOR times its first (the model learned). Reads the log through mpiddp::core's reader.
#include <mpiddp/io/run_log_reader.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: check_loss RUN.jsonl FACTOR\n");
    return 2;
  }
  try {
    const mpiddp::io::RunLog log = mpiddp::io::read_run_log(argv[1]);
    const double factor = std::atof(argv[2]);
    if (!log.end || log.epochs.size() < 2) {
      std::printf("FAIL: %s: the run did not finish, or has fewer than 2 epochs\n", argv[1]);
      return 1;
    }
    const double first = log.epochs.front().eval_loss, last = log.epochs.back().eval_loss;
    const bool ok = last < factor * first && log.end->replicas_identical;
    std::printf("%s: np=%d eval_loss %.6g (epoch 1) -> %.6g (epoch %lld), required < %.3g x; replicas %s\n",
                ok ? "OK" : "FAIL", log.world_size, first, last,
                static_cast<long long>(log.epochs.back().epoch), factor,
                log.end->replicas_identical ? "identical" : "differ");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
