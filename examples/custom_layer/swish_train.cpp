// swish_train: `mpiddp train` with the swish layer type and the label-smoothed cross-entropy
// loss type added. Every argument is mpiddp train's: mpirun -np 2 swish_train swish.json --log run.jsonl
#include <mpiddp/nn/layer_registry.hpp>
#include <mpiddp/nn/loss_registry.hpp>
#include <mpiddp/tools/train_command.hpp>

#include "label_smoothing.hpp"
#include "swish.hpp"

int main(int argc, char** argv) {
  mpiddp::nn::register_layer_type(swish_example::swish_layer_type());
  mpiddp::nn::register_loss_type(swish_example::label_smoothing_loss_type());
  return mpiddp::tools::train_command(argc, argv);
}
