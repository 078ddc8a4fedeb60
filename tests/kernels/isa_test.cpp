// The instruction-set levels and their dispatch (kernels/isa.hpp): what the CPU runs is a
// prefix of the levels starting at the baseline; a cap bounds the level kernels run at and
// goes away again; a kernel's table picks its best variant at or below a level.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/kernels/isa.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::kernels {
namespace {

const Isa kEvery[] = {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx};

TEST(Isa, NamesAreTheConfigsAndFindTheirLevels) {
  EXPECT_EQ(isa_names(), (std::vector<std::string>{"baseline", "avx2", "avx512", "avx512_bf16", "amx"}));
  for (Isa level : kEvery) {
    Isa found = Isa::kBaseline;
    ASSERT_TRUE(find_isa(isa_name(level), &found));
    EXPECT_EQ(found, level);
  }
  Isa found = Isa::kBaseline;
  EXPECT_FALSE(find_isa("avx512f", &found));
}

TEST(Isa, TheCpuRunsAPrefixOfTheLevelsFromTheBaseline) {
  const std::vector<Isa> levels = cpu_isas();
  ASSERT_FALSE(levels.empty());
  for (size_t i = 0; i < levels.size(); ++i) EXPECT_EQ(static_cast<size_t>(levels[i]), i);
  EXPECT_EQ(cpu_best_isa(), levels.back());
  // Every level it runs has nothing lacking; the next one up names what it lacks.
  for (Isa level : levels) EXPECT_EQ(cpu_lacks(level), "") << isa_name(level);
  if (cpu_best_isa() != Isa::kAmx) {
    const auto above = static_cast<Isa>(static_cast<int>(cpu_best_isa()) + 1);
    EXPECT_FALSE(cpu_runs(above));
    EXPECT_NE(cpu_lacks(above), "");
  }
  std::string text;
  for (Isa level : levels) text += std::string(" ") + isa_name(level);
  std::printf("this CPU runs:%s\n", text.c_str());
}

TEST(Isa, TheBuildCompilesEveryLevelUpToAvx512Bf16WhateverTheHost) {
  const std::vector<Isa> compiled = compiled_isas();
  EXPECT_EQ(compiled, (std::vector<Isa>{Isa::kBaseline, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}));
  EXPECT_NE(std::string(build_arch()), "unknown");
}

TEST(Isa, ACapBoundsTheLevelAndUncappingRestoresTheCpusBest) {
  for (Isa level : cpu_isas()) {
    cap_isa(level);
    EXPECT_EQ(active_isa(), level);
  }
  cap_isa(Isa::kAmx);  // a cap above the CPU is the CPU's best (the trainer refuses it first)
  EXPECT_EQ(active_isa(), cpu_best_isa());
  cap_isa(Isa::kBaseline);
  uncap_isa();
  EXPECT_EQ(active_isa(), cpu_best_isa());
}

int portable() { return 0; }
int avx2() { return 1; }
int avx512() { return 2; }

TEST(Isa, ATablePicksTheBestVariantAtOrBelowTheLevel) {
  const Dispatched<int (*)()> table({portable, avx2, avx512, nullptr, nullptr});
  EXPECT_EQ(table.at(Isa::kBaseline)(), 0);
  EXPECT_EQ(table.at(Isa::kAvx2)(), 1);
  EXPECT_EQ(table.at(Isa::kAvx512)(), 2);
  EXPECT_EQ(table.at(Isa::kAvx512Bf16)(), 2);  // none of its own: AVX-512's
  EXPECT_EQ(table.at(Isa::kAmx)(), 2);
  EXPECT_FALSE(table.has(Isa::kAmx));
  const Dispatched<int (*)()> only_portable({portable, nullptr, nullptr, nullptr, nullptr});
  EXPECT_EQ(only_portable.at(Isa::kAmx)(), 0);
  cap_isa(Isa::kBaseline);
  EXPECT_EQ(table()(), 0);
  uncap_isa();
}

TEST(Isa, ComputeIsaAboveTheCpuIsAConfigErrorNamingTheKeyAndTheFeature) {
  if (cpu_best_isa() == Isa::kAmx) GTEST_SKIP() << "this CPU runs every level: no cap is above it";
  const auto above = static_cast<Isa>(static_cast<int>(cpu_best_isa()) + 1);
  try {
    train::apply_compute_isa(isa_name(above));
    FAIL() << "no error for " << isa_name(above);
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("compute.isa"), std::string::npos) << message;
    EXPECT_NE(message.find(cpu_lacks(above)), std::string::npos) << message;
    EXPECT_EQ(e.code(), kExitConfig);
  }
  EXPECT_EQ(active_isa(), cpu_best_isa());  // the refused cap left the level alone
  train::apply_compute_isa("baseline");
  EXPECT_EQ(active_isa(), Isa::kBaseline);
  train::apply_compute_isa("auto");
  EXPECT_EQ(active_isa(), cpu_best_isa());
}

}  // namespace
}  // namespace mpiddp::kernels
