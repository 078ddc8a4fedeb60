#include "mpiddp/analysis/flight.hpp"

#include <gtest/gtest.h>

#include "mpiddp/core/error.hpp"

namespace mpiddp::analysis {
namespace {

// A rank's ring of the collectives first..last: gradient sums of 400 bytes, the last one
// open when `inside`; `odd` replaces the kind (and bytes) of one collective.
struct Odd {
  int64_t seq = 0;
  std::string kind;
  int64_t bytes = 0;
};
FlightFile ring(int rank, int size, int64_t step, int64_t first, int64_t last, bool inside,
                Odd odd = {}) {
  FlightFile f;
  f.path = "rank" + std::to_string(rank) + ".json";
  f.rank = rank;
  f.size = size;
  f.step = step;
  f.written_us = 1000 * last + 999;
  for (int64_t s = first; s <= last; ++s) {
    FlightRecord r{s, "allreduce_sum_float", 400, step, 1000 * s, 1000 * s + 10};
    if (s == odd.seq) {
      r.kind = odd.kind;
      r.bytes = odd.bytes;
    }
    if (s == last && inside) r.end_us.reset();
    f.records.push_back(r);
  }
  return f;
}

TEST(FlightAnalysis, AStalledRankIsTheOneThatHasNotArrived) {
  // Rank 1 stalled outside MPI after #4811; ranks 0 and 2 wait in #4812. The rings start at
  // different points (64 entries each, taken at different moments): aligned by number.
  const auto a = analyse_flight({ring(0, 3, 801, 4749, 4812, true), ring(1, 3, 801, 4748, 4811, false),
                                 ring(2, 3, 801, 4749, 4812, true)});
  EXPECT_EQ(a.verdict, FlightVerdict::kProgress);
  EXPECT_EQ(a.seq, 4812);
  EXPECT_EQ(a.ranks, std::vector<int>{1});
  EXPECT_EQ(a.summary, "ranks 0, 2 wait in allreduce_sum_float #4812 at step 801; rank 1 is "
                       "outside MPI at step 801, after allreduce_sum_float #4811");
}

TEST(FlightAnalysis, TheIssuesExample) {
  // rank 1 still in #4812, rank 0 already waiting in the barrier #4813.
  const auto a = analyse_flight({ring(0, 2, 801, 4750, 4813, true, {4813, "barrier", 0}),
                                 ring(1, 2, 801, 4750, 4812, true)});
  EXPECT_EQ(a.verdict, FlightVerdict::kProgress);
  EXPECT_EQ(a.seq, 4813);
  EXPECT_EQ(a.ranks, std::vector<int>{1});
  EXPECT_EQ(a.summary, "rank 0 waits in barrier #4813 at step 801; rank 1 is in "
                       "allreduce_sum_float #4812 at step 801");
}

TEST(FlightAnalysis, AMismatchedCollectiveNamesTheOddRankOut) {
  // Rank 1 entered a barrier as #30 where ranks 0 and 2 entered the gradient sum.
  const auto a = analyse_flight({ring(0, 3, 5, 1, 30, true), ring(1, 3, 5, 1, 30, true, {30, "barrier", 0}),
                                 ring(2, 3, 5, 1, 30, true)});
  EXPECT_EQ(a.verdict, FlightVerdict::kMismatch);
  EXPECT_EQ(a.seq, 30);
  EXPECT_EQ(a.ranks, std::vector<int>{1});
  EXPECT_EQ(a.summary.rfind("mismatched collective #30: ranks 0, 2 are in allreduce_sum_float of "
                            "400 bytes at step 5; rank 1 is in barrier of 0 bytes at step 5 (the "
                            "ranks' code paths diverged)",
                            0),
            0u)
      << a.summary;
}

TEST(FlightAnalysis, ACompletedMismatchComesBeforeALaterHang) {
  // #12 completed with different byte counts (a sum that MPI did not catch); later rank 0
  // is one collective ahead. The first disagreement is #12.
  const auto a = analyse_flight({ring(0, 2, 3, 1, 21, true), ring(1, 2, 3, 1, 20, false,
                                                                  {12, "allreduce_sum_float", 396})});
  EXPECT_EQ(a.verdict, FlightVerdict::kMismatch);
  EXPECT_EQ(a.seq, 12);
  EXPECT_EQ(a.ranks, std::vector<int>{1});  // a tie at np=2: rank 0 is the reference
  EXPECT_EQ(a.summary, "mismatched collective #12: rank 0 completed allreduce_sum_float of 400 "
                       "bytes at step 3; rank 1 completed allreduce_sum_float of 396 bytes at step "
                       "3 (the ranks' code paths diverged); now rank 0 waits in allreduce_sum_float "
                       "#21 at step 3; rank 1 is outside MPI at step 3, after allreduce_sum_float #20");
}

TEST(FlightAnalysis, AMissingFileNamesTheRank) {
  const auto a = analyse_flight({ring(0, 3, 5, 1, 30, true), ring(2, 3, 5, 1, 30, true)});
  EXPECT_EQ(a.verdict, FlightVerdict::kMissing);
  EXPECT_EQ(a.missing, std::vector<int>{1});
  EXPECT_EQ(a.ranks, std::vector<int>{1});
  EXPECT_EQ(a.summary, "rank 1 has no flight file (killed, or it could not write one); ranks 0, 2 "
                       "wait in allreduce_sum_float #30 at step 5");
}

TEST(FlightAnalysis, AgreementAndEveryRankWaiting) {
  const auto agree = analyse_flight({ring(0, 2, 5, 1, 30, false), ring(1, 2, 5, 3, 30, false)});
  EXPECT_EQ(agree.verdict, FlightVerdict::kAgree);
  EXPECT_TRUE(agree.ranks.empty());
  const auto stuck = analyse_flight({ring(0, 2, 5, 1, 30, true), ring(1, 2, 5, 3, 30, true)});
  EXPECT_EQ(stuck.verdict, FlightVerdict::kAllWaiting);
  EXPECT_EQ(stuck.seq, 30);
}

TEST(FlightAnalysis, FilesOfDifferentJobsOrTheSameRankTwiceAreRefused) {
  EXPECT_THROW(analyse_flight({ring(0, 2, 5, 1, 3, false), ring(1, 3, 5, 1, 3, false)}), Error);
  EXPECT_THROW(analyse_flight({ring(0, 2, 5, 1, 3, false), ring(0, 2, 5, 1, 3, false)}), Error);
  EXPECT_THROW(analyse_flight({}), Error);
}

TEST(FlightAnalysis, TheTableAlignsByNumberAndMarksTheRow) {
  const auto files = std::vector<FlightFile>{ring(0, 2, 5, 2, 4, true), ring(1, 2, 5, 1, 3, false)};
  const std::string table = flight_table(files, 2, 4);
  // Rows #1..#4; rank 0's ring starts at #2, rank 1 has not reached #4.
  EXPECT_NE(table.find("       1  (older than its ring)"), std::string::npos) << table;
  EXPECT_NE(table.find(">>        4  allreduce_sum_float 400B step 5 IN IT 0.999 ms"),
            std::string::npos) << table;
  EXPECT_NE(table.find("IN IT 0.999 ms        -"), std::string::npos) << table;
}

TEST(FlightFileReader, BadFilesNameTheFileAndTheProblem) {
  const auto message = [](const std::string& text) {
    try {
      parse_flight_file(text, "f.json");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitConfig);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = R"({"format":"mpiddp-flight-1","rank":0,"size":2,"reason":"x","written_us":1,"step":1,)";
  EXPECT_EQ(message("{"), "flight file 'f.json': not valid JSON");
  EXPECT_EQ(message(R"({"kind":"run"})"),
            "flight file 'f.json': not a flight recorder file (no \"format\": \"mpiddp-flight-1\")");
  EXPECT_EQ(message(R"({"format":"mpiddp-flight-1","rank":1,"size":2})"),
            "flight file 'f.json': has no integer field 'step'");
  EXPECT_EQ(message(head + R"("entries":[{"seq":1}]})"),
            "flight file 'f.json': entry 0 has no integer field 'bytes'");
  const std::string e1 = R"({"seq":1,"kind":"barrier","bytes":0,"step":1,"start_us":1,"end_us":2})";
  const std::string e3 = R"({"seq":3,"kind":"barrier","bytes":0,"step":1,"start_us":1,"end_us":2})";
  EXPECT_EQ(message(head + R"("entries":[)" + e1 + "," + e3 + "]}"),
            "flight file 'f.json': entry 1 has collective #3 after #1: the numbers must be consecutive");
  EXPECT_EQ(message(R"({"format":"mpiddp-flight-1","rank":2,"size":2,"step":1})"),
            "flight file 'f.json': rank 2 of size 2 is not a rank of a job");
  EXPECT_EQ(message(head + R"("entries":[{"seq":1,"kind":"barrier","bytes":0,"step":1,"start_us":1,"end_us":null},)" +
                    e3.substr(0, 7) + "2" + e3.substr(8) + "]}"),
            "flight file 'f.json': entry 0 is open (end_us null) but is not the last entry");
  EXPECT_THROW(read_flight_file("/nonexistent/flight.json"), Error);
}

}  // namespace
}  // namespace mpiddp::analysis
