// The plan of ZeRO-2's staging (include/mpiddp/train/gradient_staging.hpp).
#include "mpiddp/train/gradient_staging.hpp"

#include <algorithm>

namespace mpiddp::train {

const GradientStaging::Unit* GradientStaging::staged(const nn::LayerUnit& layer) const {
  if (layer.depth != 0 || layer.end == layer.first) return nullptr;
  const auto found = std::lower_bound(units.begin(), units.end(), layer.first,
                                      [](const Unit& unit, Index first) { return unit.first < first; });
  return found != units.end() && found->first == layer.first ? &*found : nullptr;
}

GradientStaging plan_gradient_staging(const nn::LayerUnits& layers) {
  GradientStaging staging;
  const size_t count = layers.tied.size();
  for (size_t l = 0; l < count; ++l) {
    const Index first = layers.bounds[l], end = layers.bounds[l + 1];
    if (end > first) staging.units.push_back({l, first, end, 0, 0});
  }
  int next_slot = 0;  // backward meets the units from the last
  for (auto unit = staging.units.rbegin(); unit != staging.units.rend(); ++unit) {
    const Index size = unit->end - unit->first;
    if (layers.tied[unit->layer]) {
      unit->slot = GradientStaging::kPinned;
      unit->offset = staging.pinned_values;
      staging.pinned_values += size;
    } else {
      unit->slot = next_slot;
      staging.slot_values[next_slot] = std::max(staging.slot_values[next_slot], size);
      next_slot = 1 - next_slot;
    }
  }
  return staging;
}

std::vector<size_t> parts_within_unit(const GradientStaging::Unit& unit, const std::vector<size_t>& part_begins) {
  const auto first = static_cast<size_t>(unit.first), end = static_cast<size_t>(unit.end);
  std::vector<size_t> begins;
  for (const size_t at : part_begins) begins.push_back(std::clamp(at, first, end) - first);
  return begins;
}

}  // namespace mpiddp::train
