#include "mpiddp/checkpoint/weights.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "mpiddp/core/error.hpp"

namespace mpiddp::checkpoint {

namespace {

std::vector<int64_t> to_shape(const std::vector<Index>& shape) {
  return std::vector<int64_t>(shape.begin(), shape.end());
}

}  // namespace

template <typename T>
std::vector<io::TensorToWrite> named_tensors(const std::vector<nn::ParameterTensor>& layout,
                                             const T* values, const std::string& prefix) {
  std::vector<io::TensorToWrite> tensors;
  for (const auto& t : layout)
    tensors.push_back({prefix + t.name, io::dtype_of<T>(), to_shape(t.shape), values + t.offset});
  return tensors;
}

template <typename T>
void load_named_tensors(const io::SafetensorsFile& file,
                        const std::vector<nn::ParameterTensor>& layout, T* values,
                        int error_code, const std::string& prefix, Index held_begin, Index held_end) {
  std::string problems;
  auto report = [&](const std::string& problem) { problems += (problems.empty() ? "" : "; ") + problem; };
  for (const auto& expected : layout) {
    const std::string name = prefix + expected.name;
    const std::vector<int64_t> shape = to_shape(expected.shape);
    const io::StoredTensor* stored = file.find(name);
    if (!stored) {
      report("tensor '" + name + "' " + io::shape_text(shape) + " is missing");
    } else if (stored->shape != shape) {
      report("tensor '" + name + "' has shape " + io::shape_text(stored->shape) +
             " in the file but the model needs " + io::shape_text(shape));
    } else if ((stored->dtype == io::TensorDtype::kI64) != std::is_integral_v<T>) {
      report("tensor '" + name + "' is " + io::dtype_name(stored->dtype) +
             " in the file but the model keeps it as " + io::dtype_name(io::dtype_of<T>()));
    } else {
      const Index first = expected.offset, end = expected.offset + expected.size();
      const Index lo = std::max(held_begin, first), hi = std::min(held_end, end);
      if (lo < hi) file.read_range(*stored, lo - first, hi - lo, values + (lo - held_begin));  // the held share
    }
  }
  if (!problems.empty())
    throw Error(static_cast<ExitCode>(error_code),
                "'" + file.name() + "' does not fit the model: " + problems);
}

std::vector<nn::ParameterTensor> buffer_layout(const std::vector<nn::BufferTensor>& buffers,
                                               nn::BufferType type) {
  std::vector<nn::ParameterTensor> layout;
  for (const auto& b : buffers)
    if (b.type == type) layout.push_back(b);
  return layout;
}

template <typename T>
std::vector<io::TensorToWrite> buffer_tensors(const nn::Model<T>& model) {
  std::vector<io::TensorToWrite> tensors;
  for (const auto& b : model.buffer_tensors()) {
    const bool real = b.type == nn::BufferType::kReal;
    tensors.push_back({b.name, real ? io::dtype_of<T>() : io::TensorDtype::kI64, to_shape(b.shape),
                       real ? static_cast<const void*>(model.buffer_values() + b.offset)
                            : static_cast<const void*>(model.buffer_counters() + b.offset)});
  }
  return tensors;
}

template <typename T>
void load_buffer_tensors(const io::SafetensorsFile& file, nn::Model<T>& model, int error_code) {
  load_named_tensors(file, buffer_layout(model.buffer_tensors(), nn::BufferType::kReal),
                     model.buffer_values(), error_code);
  load_named_tensors(file, buffer_layout(model.buffer_tensors(), nn::BufferType::kInt64),
                     model.buffer_counters(), error_code);
}

namespace {

// A tied tensor's second name (Model::tied_tensors): a PyTorch state_dict holds it, equal to
// its target, but a file may leave it out (safetensors' save_model keeps one name of shared
// tensors). When it is there, it must hold the same values, or the file is two models.
template <typename T>
void check_tied_tensors(const io::SafetensorsFile& file, const nn::Model<T>& model, int error_code) {
  for (const nn::ParameterTensor& tied : model.tied_tensors()) {
    if (!file.find(tied.name)) continue;
    const auto target = std::find_if(model.tensors().begin(), model.tensors().end(),
                                     [&](const nn::ParameterTensor& t) { return t.offset == tied.offset; });
    // The second name against the target's values in the file (which the model loaded).
    nn::ParameterTensor alone = tied, target_alone = *target;
    alone.offset = target_alone.offset = 0;
    std::vector<T> values(static_cast<size_t>(tied.size())), target_values(values.size());
    load_named_tensors(file, {alone}, values.data(), error_code);
    load_named_tensors(file, {target_alone}, target_values.data(), error_code);
    // Bit patterns, so that a NaN equals itself.
    if (std::memcmp(values.data(), target_values.data(), values.size() * sizeof(T)) != 0) {
      throw Error(static_cast<ExitCode>(error_code),
                  "'" + file.name() + "': tensor '" + tied.name + "' is tied to '" + target->name +
                      "' in the model, but the file holds other values under the two names");
    }
  }
}

}  // namespace

template <typename T>
std::set<std::string> state_tensor_names(const nn::Model<T>& model) {
  std::set<std::string> names = tensor_names(model.tensors());
  for (const auto& t : model.tied_tensors()) names.insert(t.name);
  for (const auto& b : model.buffer_tensors()) names.insert(b.name);
  return names;
}

void reject_unexpected_tensors(const io::SafetensorsFile& file,
                               const std::set<std::string>& expected, int error_code) {
  std::string extra;
  for (const auto& t : file.tensors())
    if (!expected.count(t.name))
      extra += (extra.empty() ? "'" : ", '") + t.name + "' " + io::shape_text(t.shape);
  if (!extra.empty())
    throw Error(static_cast<ExitCode>(error_code),
                "'" + file.name() + "' has tensors the model does not have: " + extra +
                    " (is it the state_dict of another architecture?)");
}

std::set<std::string> tensor_names(const std::vector<nn::ParameterTensor>& layout,
                                   const std::string& prefix) {
  std::set<std::string> names;
  for (const auto& t : layout) names.insert(prefix + t.name);
  return names;
}

template <typename T>
void save_weights(const std::string& path, const nn::Model<T>& model,
                  const std::map<std::string, std::string>& metadata, const T* parameters) {
  const T* values = parameters ? parameters : model.parameters();
  auto tensors = named_tensors(model.tensors(), values);
  const auto tied = named_tensors(model.tied_tensors(), values);
  tensors.insert(tensors.end(), tied.begin(), tied.end());
  const auto buffers = buffer_tensors(model);
  tensors.insert(tensors.end(), buffers.begin(), buffers.end());
  std::map<std::string, std::string> all = metadata;
  all["producer"] = std::string("mpiddp ") + MPIDDP_VERSION;
  all["model"] = model.describe();
  io::write_safetensors(path, tensors, all);
}

std::string average_weights_path(const std::string& path) {
  const std::string suffix = ".safetensors";
  const bool named = path.size() > suffix.size() && path.ends_with(suffix);
  return (named ? path.substr(0, path.size() - suffix.size()) : path) + ".ema" + suffix;
}

template <typename T>
void load_parameters(const io::SafetensorsFile& file, nn::Model<T>& model, int error_code) {
  load_named_tensors(file, model.tensors(), model.parameter_part(), error_code, "", model.parameter_part_begin(),
                     model.parameter_part_end());
}

template <typename T>
void load_weights(const std::string& path, nn::Model<T>& model) {
  try {
    // A model holding its part alone (reduce.shard "parameters") maps the file and reads its
    // slices, so that no rank holds the whole model (each rank reads it, docs/checkpoints.md).
    const io::SafetensorsFile file =
        model.holds_all_parameters() ? io::read_safetensors(path, kExitData) : io::map_safetensors(path, kExitData);
    load_parameters(file, model, kExitData);
    check_tied_tensors(file, model, kExitData);
    load_buffer_tensors(file, model, kExitData);
    reject_unexpected_tensors(file, state_tensor_names(model), kExitData);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("init.weights: ") + e.what());
  }
}

#define MPIDDP_INSTANTIATE(T)                                                                   \
  template std::vector<io::TensorToWrite> named_tensors<T>(                                     \
      const std::vector<nn::ParameterTensor>&, const T*, const std::string&);                   \
  template void load_named_tensors<T>(const io::SafetensorsFile&,                               \
                                      const std::vector<nn::ParameterTensor>&, T*, int,         \
                                      const std::string&, Index, Index);                        \
  template void load_parameters<T>(const io::SafetensorsFile&, nn::Model<T>&, int);          \
  template std::vector<io::TensorToWrite> buffer_tensors<T>(const nn::Model<T>&);         \
  template void load_buffer_tensors<T>(const io::SafetensorsFile&, nn::Model<T>&, int);    \
  template std::set<std::string> state_tensor_names<T>(const nn::Model<T>&);               \
  template void save_weights<T>(const std::string&, const nn::Model<T>&,                   \
                                const std::map<std::string, std::string>&, const T*);        \
  template void load_weights<T>(const std::string&, nn::Model<T>&);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE
template void load_named_tensors<int64_t>(const io::SafetensorsFile&,
                                          const std::vector<nn::ParameterTensor>&, int64_t*, int,
                                          const std::string&, Index, Index);

}  // namespace mpiddp::checkpoint
