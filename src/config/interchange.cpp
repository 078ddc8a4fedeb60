#include "mpiddp/config/interchange.hpp"

#include "mpiddp/core/error.hpp"

namespace mpiddp::config {

void parse_interchange_keys(io::JsonSection& root, Config& c) {
  {
    auto init = root.section("init");
    c.init_weights = init.text("weights", "");
    init.finish();
  }
  c.save_weights = root.text("save_weights", "");
  {
    auto checkpoint = root.section("checkpoint");
    auto& k = c.checkpoint;
    k.dir = checkpoint.text("dir", "");
    k.every_epochs = checkpoint.integer("every_epochs", 0, 0, io::kMaxConfigCount);
    k.every_steps = checkpoint.integer("every_steps", 0, 0, io::kMaxConfigCount);
    k.keep = checkpoint.integer("keep", 3, 0, io::kMaxConfigCount);
    k.format = checkpoint.choice("format", "file", {"file", "parts"});
    if (k.dir.empty() && (k.every_epochs > 0 || k.every_steps > 0))
      throw ConfigError("checkpoint.dir", "checkpoint.every_epochs/every_steps need a directory "
                                          "to write to; set checkpoint.dir");
    if (checkpoint.has("keep_best")) {
      std::vector<std::string> allowed = {""};  // "": off, as when the key is absent
      for (const auto& metric : evaluation_metrics()) allowed.push_back(metric);
      k.keep_best = checkpoint.choice("keep_best", "", allowed);
      if (!k.keep_best.empty() && k.dir.empty())
        throw ConfigError("checkpoint.keep_best", "the best checkpoint needs a directory to be "
                                                  "kept in; set checkpoint.dir");
    }
    checkpoint.finish();
  }
}

}  // namespace mpiddp::config
