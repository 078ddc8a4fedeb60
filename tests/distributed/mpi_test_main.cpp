// main() for MPI test executables: every rank runs every test; only rank 0 prints the
// progress, but any rank's failure is printed and fails the process (and so the launcher).
#include <gtest/gtest.h>

#include "mpiddp/distributed/mpi_communicator.hpp"

namespace {

// Prints failures of non-zero ranks, which are otherwise silent.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_, result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  mpiddp::distributed::MpiRuntime runtime(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = mpiddp::distributed::MpiCommunicator().rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  return RUN_ALL_TESTS();
}
