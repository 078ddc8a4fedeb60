#pragma once
// Moving a model's parameters (and buffers laid out like them, e.g. Adam moments) between
// the flat buffer and named safetensors tensors. The names are a PyTorch nn.Sequential
// state_dict's ("0.weight" [out, in], "0.bias" [out], "2.weight", ...), optionally behind a
// prefix, so a state_dict saved from PyTorch loads as it is and ours load in PyTorch.
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mpiddp/io/safetensors.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::checkpoint {

// The tensors of `values` (a flat buffer of P elements laid out as the model's parameters),
// named prefix + tensor name, pointing into `values` (no copy).
template <typename T>
std::vector<io::TensorToWrite> named_tensors(const std::vector<nn::ParameterTensor>& layout,
                                             const T* values, const std::string& prefix = "");

// Fills `values` (P) from the tensors named prefix + tensor name, converting F32 <-> F64;
// T = int64_t reads I64 tensors (counters), and a real tensor never fills a counter or back.
// Every missing or mis-shaped tensor is reported, with its name and both shapes, in one
// Error(error_code). With a held range, `values` are [held_begin, held_end) of the P alone
// (a model holding its part of the parameters): of each tensor only what lies there is
// written, and every tensor is checked all the same.
template <typename T>
void load_named_tensors(const io::SafetensorsFile& file,
                        const std::vector<nn::ParameterTensor>& layout, T* values,
                        int error_code, const std::string& prefix = "", Index held_begin = 0,
                        Index held_end = std::numeric_limits<Index>::max());

// The model's parameters from the file's tensors of their names: those it holds
// (Model::parameter_part), all P or its part.
template <typename T>
void load_parameters(const io::SafetensorsFile& file, nn::Model<T>& model, int error_code);

// An Error(error_code) listing the file's tensors whose names are not in `expected`.
void reject_unexpected_tensors(const io::SafetensorsFile& file,
                               const std::set<std::string>& expected, int error_code);

// prefix + each tensor name of the layout.
std::set<std::string> tensor_names(const std::vector<nn::ParameterTensor>& layout,
                                   const std::string& prefix = "");

// The buffers of one type (running statistics, or counters), as a layout of offsets into
// Model::buffer_values() or buffer_counters() that load_named_tensors understands.
std::vector<nn::ParameterTensor> buffer_layout(const std::vector<nn::BufferTensor>& buffers,
                                               nn::BufferType type);

// The model's buffers (running statistics in its dtype, counters as I64), named as in a
// PyTorch state_dict ("1.running_mean", "1.num_batches_tracked"), pointing into the model.
template <typename T>
std::vector<io::TensorToWrite> buffer_tensors(const nn::Model<T>& model);
// Fills the model's buffers from the file's tensors of the same names (Error(error_code)
// for a missing, mis-shaped or mistyped one).
template <typename T>
void load_buffer_tensors(const io::SafetensorsFile& file, nn::Model<T>& model, int error_code);
// The names of every parameter and buffer: a state_dict's keys.
template <typename T>
std::set<std::string> state_tensor_names(const nn::Model<T>& model);

// Writes the model's parameters and buffers (its state_dict, tied tensors under both names)
// as a safetensors file of its dtype, atomically, with `metadata` beside the producer's and
// the model's description (checkpoint/vocabulary.hpp: a language model's vocabulary and config).
// parameters: the values written under the parameters' names, (P) laid out as the model's
// (the average of ema.decay); null: the model's own.
template <typename T>
void save_weights(const std::string& path, const nn::Model<T>& model,
                  const std::map<std::string, std::string>& metadata = {}, const T* parameters = nullptr);

// Where the average of the weights (ema.decay) goes beside the weights file `path`:
// "W.safetensors" -> "W.ema.safetensors", another name -> "NAME.ema.safetensors".
std::string average_weights_path(const std::string& path);

// init.weights: fills the model's parameters and buffers from a file holding exactly its
// tensors (load_state_dict(strict=True)).
template <typename T>
void load_weights(const std::string& path, nn::Model<T>& model);

}  // namespace mpiddp::checkpoint
