#include "mpiddp/distributed/flight_recorder.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "mpiddp/analysis/flight.hpp"

namespace mpiddp::distributed {
namespace {

TEST(FlightRing, KeepsTheLast64InOrderAndMarksTheOpenOne) {
  FlightRing ring;
  EXPECT_TRUE(ring.entries().empty());
  // 100 collectives: seq 1..100, the last one still open. The ring holds 37..100.
  for (int64_t seq = 1; seq <= 100; ++seq) {
    ring.enter(seq, seq % 2 ? Collective::kBarrier : Collective::kAllreduceSumFloat, seq * 4,
               seq / 10, seq * 1000);
    if (seq < 100) ring.leave(seq * 1000 + 500);
  }
  const auto entries = ring.entries();
  ASSERT_EQ(entries.size(), 64u);
  EXPECT_EQ(ring.recorded(), 100);
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t seq = 37 + static_cast<int64_t>(i);
    EXPECT_EQ(entries[i].seq, seq);
    EXPECT_EQ(entries[i].kind, seq % 2 ? Collective::kBarrier : Collective::kAllreduceSumFloat);
    EXPECT_EQ(entries[i].bytes, seq * 4);
    EXPECT_EQ(entries[i].step, seq / 10);
    EXPECT_EQ(entries[i].start_ns, seq * 1000);
    EXPECT_EQ(entries[i].end_ns, seq == 100 ? -1 : seq * 1000 + 500);
  }
}

TEST(FlightRing, FewerThanCapacity) {
  FlightRing ring;
  ring.enter(1, Collective::kAllgather, 8, 0, 10);
  ring.leave(20);
  ring.enter(2, Collective::kBroadcast, 16, 0, 30);
  const auto entries = ring.entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].end_ns, 20);
  EXPECT_EQ(entries[1].end_ns, -1);
}

TEST(FlightRecorder, KeysRoundTripAndPathsFollowTheConfig) {
  for (auto c : {Collective::kAllreduceSumFloat, Collective::kAllreduceSumDouble,
                 Collective::kAllreduceMaxDouble, Collective::kBroadcast, Collective::kAllgather,
                 Collective::kAllgatherStrings, Collective::kBarrier, Collective::kSharedWindow,
                 Collective::kAllreduceSumInt64})
    EXPECT_EQ(collective_from_key(collective_key(c)), c) << collective_key(c);
  EXPECT_EQ(collective_from_key("no such"), Collective::kNone);
  EXPECT_STREQ(collective_name(Collective::kBarrier), "MPI_Barrier");
  EXPECT_EQ(flight_file_path("", "run/log.jsonl", 3), "run/log.jsonl.flight.rank3.json");
  EXPECT_EQ(flight_file_path("/tmp/f", "run/log.jsonl", 0), "/tmp/f/flight.rank0.json");
  EXPECT_EQ(flight_file_path("", "", 0), "");
}

// The writer's output is what the reader of mpiddp flight accepts, times turned into wall
// clock: an entry that started 2 ms (steady) before the dump started 2000 us before now_us.
TEST(FlightRecorder, JsonIsReadBackExactly) {
  FlightDump dump;
  dump.rank = 1;
  dump.size = 2;
  dump.step = 801;
  dump.reason = "watchdog";
  dump.entries = {{4811, Collective::kAllreduceSumFloat, 10952, 800, 1'000'000, 1'500'000},
                  {4812, Collective::kBarrier, 0, 801, 3'000'000, -1}};
  const int64_t now_ns = 5'000'000, now_us = 1'700'000'000'000'000;
  const auto file = analysis::parse_flight_file(flight_json(dump, now_ns, now_us), "x.json");
  EXPECT_EQ(file.rank, 1);
  EXPECT_EQ(file.size, 2);
  EXPECT_EQ(file.step, 801);
  EXPECT_EQ(file.reason, "watchdog");
  EXPECT_EQ(file.written_us, now_us);
  ASSERT_EQ(file.records.size(), 2u);
  EXPECT_EQ(file.records[0].seq, 4811);
  EXPECT_EQ(file.records[0].kind, "allreduce_sum_float");
  EXPECT_EQ(file.records[0].bytes, 10952);
  EXPECT_EQ(file.records[0].step, 800);
  EXPECT_EQ(file.records[0].start_us, now_us - 4000);  // (5 ms - 1 ms) before now
  EXPECT_EQ(file.records[0].end_us, now_us - 3500);
  EXPECT_EQ(file.records[1].kind, "barrier");
  EXPECT_TRUE(file.records[1].open());
  EXPECT_EQ(file.records[1].start_us, now_us - 2000);
}

TEST(FlightRecorder, WritesTheFileAtomicallyCreatingItsDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / "mpiddp_flight_test" / "sub";
  std::filesystem::remove_all(dir.parent_path());
  FlightDump dump;
  dump.entries = {{1, Collective::kAllgather, 8, 0, 0, 10}};
  const std::string path = flight_file_path(dir.string(), "", 0);
  write_flight_file(path, dump);
  const auto file = analysis::read_flight_file(path);
  ASSERT_EQ(file.records.size(), 1u);
  EXPECT_EQ(file.records[0].kind, "allgather");
  EXPECT_FALSE(std::filesystem::exists(dir / ".flight.rank0.json.tmp"));
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace mpiddp::distributed
