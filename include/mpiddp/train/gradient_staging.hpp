#pragma once
// Note [gradients staged by unit]
// With reduce.shard "gradients" (ZeRO-2) a rank keeps only its part of the averaged gradient,
// never the whole. Backward still makes every gradient whole on every rank, a unit at a time
// (a unit: one of the model's own layers, a residual with its whole body), so each unit writes
// into staging memory, is summed over the ranks into its owners' parts as soon as its backward
// ends (the reduce-scatter), and its staging is written again by a later unit. Two slots take
// the units in turn, so that one unit's sum travels while the next one computes; the sum of a
// slot is waited for just before the slot is written again. A unit whose tensor a later layer
// is tied to (the GPT's token embedding, used again by the head) is written twice in one
// backward, first by the head, last by itself, so it has staging of its own, "pinned", and is
// summed after its own backward. A rank then holds its part (P / N values), the two slots (each
// the size of the largest unit it takes) and the pinned units, in place of P. A model whose
// one layer holds most of its parameters gains nothing: that layer's unit is staged whole.
#include <vector>

#include "mpiddp/core/types.hpp"
#include "mpiddp/nn/layer_hooks.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::train {

struct GradientStaging {
  static constexpr int kPinned = -1;
  struct Unit {
    size_t layer;        // the model's own layer
    Index first, end;    // its parameters [first, end) in the model's buffer
    int slot;            // 0 or 1, or kPinned
    Index offset;        // a pinned unit's place among the pinned units (0 in a slot)
  };
  std::vector<Unit> units;         // the layers with parameters, in forward order
  Index slot_values[2] = {0, 0};   // each slot: the largest of its units
  Index pinned_values = 0;         // the pinned units, one after another
  // Values of staging memory: the two slots, then the pinned units.
  Index values() const { return slot_values[0] + slot_values[1] + pinned_values; }
  // The unit that the layer hooks' unit is, or null for a layer inside one (depth above 0) or
  // without parameters.
  const Unit* staged(const nn::LayerUnit& layer) const;
  size_t index_of(const Unit& unit) const { return static_cast<size_t>(&unit - units.data()); }
  // Where unit u's staging begins in that memory.
  Index begin_of(const Unit& unit) const {
    if (unit.slot == kPinned) return slot_values[0] + slot_values[1] + unit.offset;
    return unit.slot == 0 ? 0 : slot_values[0];
  }
};

// The staging of `layers` (nn::layer_units): unpinned units take the slots in turn in
// backward order, so that two consecutive ones never share a slot. A pure function.
GradientStaging plan_gradient_staging(const nn::LayerUnits& layers);

// Where each part (part_begins: (parts + 1), in parameters) begins within `unit`, relative to
// its first parameter: (parts + 1) offsets in [0, unit.end - unit.first]. A unit's sum into the
// parts (ZeRO-2) and its gather from them (ZeRO-3) are cut there.
std::vector<size_t> parts_within_unit(const GradientStaging::Unit& unit, const std::vector<size_t>& part_begins);

}  // namespace mpiddp::train
