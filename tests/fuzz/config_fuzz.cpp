// Fuzz target: a config file, and the same bytes as a --set override. Anything but a
// ConfigError (another exception, a crash, an ASan or UBSan finding) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "mpiddp/core/error.hpp"
#include "mpiddp/config/config.hpp"

using namespace mpiddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const config::Config config = config::parse_config(config::parse_config_text(text, "fuzz.json"));
    config.per_rank_batch(3);
  } catch (const ConfigError&) {
  }
  try {
    io::Json user = config::default_experiment();
    config::apply_override(user, text);
    config::parse_config(user);
  } catch (const ConfigError&) {
  }
  return 0;
}
