#include "mpiddp/config/fault.hpp"

#include <gtest/gtest.h>

#include "../support/config_errors.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::config {
namespace {

Config with(const std::vector<std::string>& assignments) {
  io::Json user = default_experiment();
  for (const auto& a : assignments) apply_override(user, a);
  return parse_config(user);
}

using test::override_error_key;

TEST(FaultConfig, Defaults) {
  const Config c = with({});
  EXPECT_EQ(c.faults.on_nonfinite, "abort");
  EXPECT_EQ(c.faults.max_skipped, 10);
  EXPECT_EQ(c.faults.divergence_action, "abort");
  EXPECT_EQ(c.faults.watchdog_timeout_s, 300.0);
  EXPECT_EQ(c.faults.watchdog_action, "abort");
  EXPECT_FALSE(c.faults.inject.enabled());
  // Logged in the run record with every default filled in.
  EXPECT_EQ(c.resolved["watchdog"]["timeout_s"], 300.0);
  EXPECT_EQ(c.resolved["debug"]["fail_rank"], -1);
  EXPECT_EQ(c.resolved["divergence"]["action"], "abort");
}

TEST(FaultConfig, KeysAsDocumented) {
  const Config c = with({"on_nonfinite=skip", "max_skipped=3", "divergence.action=resync",
                         "watchdog.timeout_s=0", "watchdog.action=warn", "debug.fail_rank=1",
                         "debug.fail_step=5", "debug.fail_kind=nan", "debug.fail_count=2"});
  EXPECT_EQ(c.faults.on_nonfinite, "skip");
  EXPECT_EQ(c.faults.max_skipped, 3);
  EXPECT_EQ(c.faults.divergence_action, "resync");
  EXPECT_EQ(c.faults.watchdog_timeout_s, 0.0);
  EXPECT_EQ(c.faults.watchdog_action, "warn");
  const FaultInjection& f = c.faults.inject;
  EXPECT_TRUE(f.enabled());
  // Steps 5 and 6 on rank 1, nan only.
  EXPECT_FALSE(f.fires(1, 4, "nan"));
  EXPECT_TRUE(f.fires(1, 5, "nan"));
  EXPECT_TRUE(f.fires(1, 6, "nan"));
  EXPECT_FALSE(f.fires(1, 7, "nan"));
  EXPECT_FALSE(f.fires(0, 5, "nan"));
  EXPECT_FALSE(f.fires(1, 5, "throw"));
}

TEST(FaultConfig, MismatchAndTheFlightDirectory) {
  const Config c = with({"debug.fail_rank=1", "debug.fail_kind=mismatch", "debug.flight_dir=/tmp/f"});
  EXPECT_TRUE(c.faults.inject.fires(1, 1, "mismatch"));
  EXPECT_EQ(c.faults.flight_dir, "/tmp/f");
  EXPECT_EQ(with({}).faults.flight_dir, "");
  EXPECT_EQ(with({}).resolved["debug"]["flight_dir"], "");
}

TEST(FaultConfig, BadValuesNameTheKey) {
  EXPECT_EQ(override_error_key("on_nonfinite=ignore"), "on_nonfinite");
  EXPECT_EQ(override_error_key("max_skipped=-1"), "max_skipped");
  EXPECT_EQ(override_error_key("divergence.action=warn"), "divergence.action");
  EXPECT_EQ(override_error_key("divergence.every=3"), "divergence.every");
  EXPECT_EQ(override_error_key("watchdog.timeout_s=-1"), "watchdog.timeout_s");
  EXPECT_EQ(override_error_key("watchdog.action=kill"), "watchdog.action");
  EXPECT_EQ(override_error_key("debug.fail_kind=segfault"), "debug.fail_kind");
  EXPECT_EQ(override_error_key("debug.fail_rank=-2"), "debug.fail_rank");
  EXPECT_EQ(override_error_key("debug.fail_count=0"), "debug.fail_count");
  // Setup (step 0) has no gradients to poison.
  try {
    with({"debug.fail_rank=0", "debug.fail_step=0", "debug.fail_kind=nan"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "debug.fail_step");
  }
}

// Found by fuzz_config: a --set value that is not UTF-8 made every later dump() (error
// messages, the config hash, the log) throw nlohmann's type_error instead of a ConfigError.
TEST(FaultConfig, OverrideThatIsNotUtf8IsAConfigError) {
  EXPECT_EQ(override_error_key("optimizer.lr=\x91+1"), "optimizer.lr");
  EXPECT_EQ(override_error_key("log.path=\"\xff\xfe\""), "log.path");
}

}  // namespace
}  // namespace mpiddp::config
