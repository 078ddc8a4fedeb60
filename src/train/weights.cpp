#include "mpiddp/train/weights.hpp"

#include "mpiddp/core/error.hpp"

namespace mpiddp::train {

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
                        int error_code, const std::string& prefix) {
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
    } else {
      file.read(*stored, values + expected.offset);
    }
  }
  if (!problems.empty())
    throw Error(static_cast<ExitCode>(error_code),
                "'" + file.name() + "' does not fit the model: " + problems);
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
void save_weights(const std::string& path, const nn::Sequential<T>& model) {
  io::write_safetensors(path, named_tensors(model.tensors(), model.parameters()),
                        {{"producer", std::string("mpiddp ") + MPIDDP_VERSION},
                         {"model", model.describe()}});
}

template <typename T>
void load_weights(const std::string& path, nn::Sequential<T>& model) {
  try {
    const io::SafetensorsFile file = io::read_safetensors(path, kExitData);
    load_named_tensors(file, model.tensors(), model.parameters(), kExitData);
    reject_unexpected_tensors(file, tensor_names(model.tensors()), kExitData);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("init.weights: ") + e.what());
  }
}

#define MPIDDP_INSTANTIATE(T)                                                                   \
  template std::vector<io::TensorToWrite> named_tensors<T>(                                     \
      const std::vector<nn::ParameterTensor>&, const T*, const std::string&);                   \
  template void load_named_tensors<T>(const io::SafetensorsFile&,                               \
                                      const std::vector<nn::ParameterTensor>&, T*, int,         \
                                      const std::string&);                                      \
  template void save_weights<T>(const std::string&, const nn::Sequential<T>&);                  \
  template void load_weights<T>(const std::string&, nn::Sequential<T>&);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
