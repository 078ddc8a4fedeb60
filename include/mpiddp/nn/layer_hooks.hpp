#pragma once
// Hooks around each unit of a model's passes: what a step strategy installs to act before a
// layer computes or after its gradients are made, without the layers knowing (PyTorch's
// module hooks, which FSDP's fully_shard uses to gather a unit's parameters before its forward
// and backward and to reduce-scatter its gradients after).
//
// Every Sequential calls them for each of its layers: before the layer's forward, before its
// backward, after its backward. A residual is a unit itself and holds units (its body's
// layers), so the hooks see both: before_forward("3"), then before_forward("3.body.0") ... A
// residual that recomputes runs its body's forward again inside its backward, and the body's
// before_forward hooks are called again there, before its layers' backward.
#include <string>

#include "mpiddp/core/types.hpp"

namespace mpiddp::nn {

// One layer as the hooks see it. Its key is its state-dict prefix ("3", "3.body.1"); its
// parameters are [first, end) of the model's flat parameter (and gradient) buffer, empty for a
// layer without any; depth is 0 for the model's own layers, 1 inside a residual, and so on.
struct LayerUnit {
  std::string key;
  std::string type;  // the layer's type: "linear", "residual", ...
  Index first = 0, end = 0;
  int depth = 0;
};

class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void before_forward(const LayerUnit& unit) = 0;
  virtual void before_backward(const LayerUnit& unit) = 0;
  virtual void after_backward(const LayerUnit& unit) = 0;
};

}  // namespace mpiddp::nn
