#pragma once
// Kernel tests run at every instruction-set level (kernels/isa.hpp): a test suite derived from
// EveryIsaLevel and instantiated with MPIDDP_INSTANTIATE_AT_EVERY_LEVEL runs each test once per
// level, capped there, and reports a level this CPU lacks as skipped, naming what it lacks: its
// variants are compiled in every build, and run by the next machine that has it.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "mpiddp/kernels/isa.hpp"

namespace mpiddp::kernels {
// GoogleTest prints a level by its name (found by argument-dependent lookup), not its bytes.
inline void PrintTo(Isa level, std::ostream* out) { *out << isa_name(level); }
}  // namespace mpiddp::kernels

namespace mpiddp::testing {

class EveryIsaLevel : public ::testing::TestWithParam<kernels::Isa> {
 protected:
  void SetUp() override {
    const kernels::Isa level = GetParam();
    if (!kernels::cpu_runs(level))
      GTEST_SKIP() << "level " << kernels::isa_name(level) << " compiled, not run: this CPU lacks "
                   << kernels::cpu_lacks(level);
    kernels::cap_isa(level);
  }
  void TearDown() override { kernels::uncap_isa(); }
  kernels::Isa level() const { return GetParam(); }
};

inline std::string isa_test_name(const ::testing::TestParamInfo<kernels::Isa>& info) {
  return kernels::isa_name(info.param);
}

}  // namespace mpiddp::testing

#define MPIDDP_INSTANTIATE_AT_EVERY_LEVEL(Suite)                                                         \
  INSTANTIATE_TEST_SUITE_P(Level, Suite,                                                               \
                           ::testing::Values(mpiddp::kernels::Isa::kBaseline, mpiddp::kernels::Isa::kAvx2, \
                                             mpiddp::kernels::Isa::kAvx512,                            \
                                             mpiddp::kernels::Isa::kAvx512Bf16,                        \
                                             mpiddp::kernels::Isa::kAmx),                              \
                           mpiddp::testing::isa_test_name)
