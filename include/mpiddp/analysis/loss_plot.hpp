#pragma once
// The loss-curve figure of `mpiddp plot`: one or more runs overlaid, each named by its world
// size and file. Top panel: every logged step's loss (faint) and each epoch's eval loss
// (bold, at the step that ended the epoch) against the optimizer step. Bottom panel (two or
// more logs): each later log's per-step |loss - loss of the first log| on a log scale.
#include <string>
#include <vector>

#include "mpiddp/io/run_log_reader.hpp"

namespace mpiddp::analysis {

// The SVG document. Groups with ids "loss-panel" and "diff-panel" (the latter only with two
// or more logs) hold the panels, "legend" the legend. Throws std::invalid_argument when no
// log has a step or epoch record.
std::string loss_curves_svg(const std::vector<io::RunLog>& logs);

}  // namespace mpiddp::analysis
