// Checkpoints in parts (include/mpiddp/checkpoint/checkpoint_parts.hpp): each rank's part
// written as a safetensors file of slices, the index that makes them a checkpoint, and the
// reading back at any world size, checked slice by slice.
//
// Note [checkpoints in parts]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Sharded, the optimizer state (and, under reduce.shard "parameters", the parameters) exists
// only in parts, one per rank. A checkpoint file written by one rank first gathers the whole
// state there, the memory sharding was meant to save. So each rank writes its own part, and
// rank 0 writes an index that makes the parts one checkpoint:
//
//   - The parts are cut by the flat parameter buffer's elements (the optimizer's parts, or,
//     unsharded, the world's even cut), but stored per original tensor, unpadded: a part holds,
//     of each tensor it meets, the slice [begin, end) of its elements under the tensor's own
//     name, and the index lists each tensor's dtype, shape and slices. So the layout does not
//     depend on the world size that wrote it, and a run at any other world size reads what its
//     own parts need (DeepSpeed's and torch.distributed.checkpoint's lesson: flat padded
//     buffers saved as they are tie a checkpoint to its world size, or corrupt it silently).
//   - The index is written last, atomically: the checkpoint exists only once its rename has
//     landed, as a file checkpoint exists only once its own has. A killed write leaves a
//     directory without an index, which is not a checkpoint and is removed at the next start.
//   - Every slice carries the checksum of its bytes, and every part the write's id (in its
//     name and its metadata): a damaged part, a missing one, or one of another checkpoint
//     copied in is refused, naming the file, when it is read; the index's slices must cover
//     every tensor exactly once.
//   - The best checkpoint is rewritten in place: its parts' names carry the write's id, which
//     a number drawn afresh for each write makes unique (a run restarted from an earlier
//     checkpoint writes the same step's best again), so a new write never overwrites the
//     parts the current index names, and the old ones are removed only after the new index
//     has landed.
#include "mpiddp/checkpoint/checkpoint_parts.hpp"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>
#include <type_traits>

#include "checkpoint_metadata.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/checkpoint/vocabulary.hpp"
#include "mpiddp/checkpoint/weights.hpp"
#include "mpiddp/io/atomic_file.hpp"

namespace mpiddp::checkpoint {

namespace fs = std::filesystem;
using detail::checkpoint_integer;
using detail::kOptimizerPrefix;
using detail::refuse;

namespace {

constexpr const char* kIndexKey = "mpiddp_checkpoint_parts";  // the index format's version
constexpr int kIndexVersion = 1;
constexpr const char* kPartMetadataKey = "mpiddp_checkpoint_part";
// The most elements an index may give one tensor: 2^40, far beyond a model that trains here,
// and small enough that its bytes and every offset into them fit in 64 bits.
constexpr uint64_t kMaxTensorElements = uint64_t{1} << 40;

std::string part_file_name(int part, int parts, const std::string& id) {
  char name[96];
  std::snprintf(name, sizeof name, "part-%05d-of-%05d-%s.safetensors", part, parts, id.c_str());
  return name;
}

// A slice to write: elements [begin, end) of the tensor `name` (of `shape`), at `data`.
struct SliceToWrite {
  std::string name;
  io::TensorDtype dtype;
  std::vector<int64_t> shape;
  int64_t begin, end;
  const void* data;
};

// The slices of values (a flat buffer laid out as `layout`) that fall in [begin, end).
template <typename T>
void add_slices(std::vector<SliceToWrite>& slices, const std::vector<nn::ParameterTensor>& layout,
                const T* values, Index values_begin, Index begin, Index end, const std::string& prefix) {
  for (const auto& t : layout) {
    const Index lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.size());
    if (lo >= hi) continue;
    slices.push_back({prefix + t.name, io::dtype_of<T>(), std::vector<int64_t>(t.shape.begin(), t.shape.end()),
                      lo - t.offset, hi - t.offset, values + (lo - values_begin)});
  }
}

// An integer field of a JSON object, refused unless it is a whole number in [low, high].
int64_t index_integer(const io::Json& object, const char* key, int64_t low, int64_t high, const std::string& path,
                      const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer() || it->get<int64_t>() < low || it->get<int64_t>() > high)
    refuse(path, "corrupt: " + where + " has no integer '" + key + "' in [" + std::to_string(low) + ", " +
                     std::to_string(high) + "]");
  return it->get<int64_t>();
}

io::TensorDtype dtype_from_name(const std::string& name, const std::string& path, const std::string& where) {
  for (io::TensorDtype dtype : {io::TensorDtype::kF32, io::TensorDtype::kF64, io::TensorDtype::kI64})
    if (name == io::dtype_name(dtype)) return dtype;
  refuse(path, "corrupt: " + where + " has dtype '" + name + "'; expected F32, F64 or I64");
}

std::string range_text(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// A checkpoint's tensors, name and shape, in a file checkpoint's order: the parameters, the
// tied names, the buffers, and each optimizer state buffer (by name) laid out as the parameters.
template <typename T>
std::vector<std::pair<std::string, std::vector<int64_t>>> state_tensors(const nn::Model<T>& model,
                                                                        const std::vector<std::string>& buffers) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
  auto add = [&](const std::string& name, const std::vector<Index>& shape) {
    tensors.emplace_back(name, std::vector<int64_t>(shape.begin(), shape.end()));
  };
  for (const auto& t : model.tensors()) add(t.name, t.shape);
  for (const auto& t : model.tied_tensors()) add(t.name, t.shape);
  for (const auto& b : model.buffer_tensors()) add(b.name, b.shape);
  for (const auto& buffer : buffers)
    for (const auto& t : model.tensors()) add(kOptimizerPrefix + buffer + "." + t.name, t.shape);
  return tensors;
}

// The names of the optimizer's state buffers (momentum_buffer, exp_avg, ..., ema) from a
// rule over any part: a rule over an empty part holds no buffer of its own, but its type and
// ema say which it would hold.
template <typename T>
std::vector<std::string> state_buffer_names(optim::UpdateRule<T>& rule) {
  std::vector<std::string> names;
  for (const auto& buffer : rule.state_buffers()) names.push_back(buffer.name);
  return names;
}

}  // namespace

std::string parts_write_id(const RunIdentity& identity, const std::string& checkpoint, int64_t step, uint64_t nonce) {
  const std::string what = identity.config.dump() + "\n" + identity.model + "\n" + std::to_string(identity.world_size) +
                           "\n" + fs::path(checkpoint).filename().string() + "\n" + std::to_string(step) + "\n" +
                           std::to_string(nonce);
  return hex64(fnv1a(what));
}

template <typename T>
io::Json write_part(const PartToWrite& part, const nn::Model<T>& model, optim::UpdateRule<T>& local,
                    Index local_begin) {
  std::vector<SliceToWrite> slices;
  // The model holds all P, or (reduce.shard "parameters") the part this rank writes.
  assert(model.parameter_part_begin() <= part.begin && part.end <= model.parameter_part_end());
  const T* parameters = model.parameter_part();
  const Index held_from = model.parameter_part_begin();
  add_slices(slices, model.tensors(), parameters, held_from, part.begin, part.end, "");
  // A state_dict's second names of tied tensors, as a file checkpoint holds them.
  add_slices(slices, model.tied_tensors(), parameters, held_from, part.begin, part.end, "");
  if (part.buffers) {
    for (const auto& b : buffer_tensors(model)) {
      int64_t elements = 1;
      for (int64_t d : b.shape) elements *= d;
      slices.push_back({b.name, b.dtype, b.shape, 0, elements, b.data});
    }
  }
  for (const auto& buffer : local.state_buffers())
    add_slices(slices, model.tensors(), buffer.values->data(), local_begin, part.begin, part.end,
               kOptimizerPrefix + buffer.name + ".");

  const std::string file = part_file_name(part.part, part.parts, part.id);
  std::vector<io::TensorToWrite> tensors;
  io::Json described = io::Json::array();
  for (const auto& s : slices) {
    io::TensorToWrite t{s.name, s.dtype, {s.end - s.begin}, s.data};
    tensors.push_back(t);
    described.push_back({{"name", s.name}, {"dtype", io::dtype_name(s.dtype)}, {"shape", s.shape},
                         {"begin", s.begin}, {"end", s.end},
                         {"checksum", hex64(fnv1a(s.data, io::tensor_bytes(t)))}});
  }
  const io::Json identity = {{"id", part.id}, {"part", part.part}, {"parts", part.parts}};
  io::write_safetensors((fs::path(part.checkpoint) / file).string(), tensors, {{kPartMetadataKey, identity.dump()}});
  return {{"file", file}, {"tensors", described}};
}

template <typename T>
void write_parts_index(const std::string& checkpoint, const std::string& id, const TrainingPosition& position,
                       const RunIdentity& identity, const nn::Model<T>& model, optim::UpdateRule<T>& local,
                       const std::vector<io::Json>& parts, const std::function<void()>& before_rename) {
  const std::vector<std::string> buffers = state_buffer_names(local);
  io::Json state = detail::checkpoint_state(position, identity, local.steps(), buffers);
  if (!position.evaluations.is_null()) state["evaluations"] = position.evaluations;

  // Each tensor's slices, gathered from the parts' descriptions.
  io::Json files = io::Json::array();
  std::map<std::string, io::Json> described;
  for (size_t p = 0; p < parts.size(); ++p) {
    files.push_back(parts[p].at("file"));
    for (const auto& t : parts[p].at("tensors")) {
      io::Json& entry = described[t.at("name").get<std::string>()];
      if (entry.is_null()) entry = {{"dtype", t.at("dtype")}, {"shape", t.at("shape")}, {"slices", io::Json::array()}};
      entry["slices"].push_back({{"part", p}, {"begin", t.at("begin")}, {"end", t.at("end")},
                                 {"checksum", t.at("checksum")}});
    }
  }
  // In a file checkpoint's order (the parameters, the tied names, the buffers, the optimizer's
  // state), so that an export of either format writes the same bytes.
  io::Json tensors = io::Json::object();
  for (const auto& [name, shape] : state_tensors(model, buffers)) {
    auto found = described.find(name);
    if (found == described.end()) throw Error(kExitFailure, "checkpoint in parts: no part holds tensor '" + name + "'");
    tensors[name] = std::move(found->second);
    described.erase(found);
  }
  // A state buffer that rank 0's part lacks (none today: part 0 is never empty) still goes in.
  for (auto& [name, entry] : described) tensors[name] = std::move(entry);
  io::Json index = {{kIndexKey, kIndexVersion}, {"id", id}, {"mpiddp_checkpoint", state}};
  if (!identity.vocabulary.empty()) index["vocabulary"] = identity.vocabulary;
  index["parts"] = files;
  index["tensors"] = tensors;
  const std::string text = index.dump(1) + "\n";
  io::write_file_atomically(parts_index_path(checkpoint), {{text.data(), text.size()}}, before_rename);

  remove_unindexed_files(checkpoint);  // the previous best's parts
}

std::vector<std::string> remove_unindexed_files(const std::string& checkpoint) {
  std::vector<std::string> removed;
  std::set<std::string> named = {fs::path(parts_index_path(checkpoint)).filename().string()};
  try {
    // Only an index this version reads names what is kept: a damaged one, or one of a later
    // format, leaves the directory as it is.
    const PartsCheckpoint index(checkpoint, io::read_whole_file(parts_index_path(checkpoint), kExitCheckpoint));
    for (const auto& file : index.part_files()) named.insert(file);
  } catch (const Error&) {
    return removed;
  }
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(checkpoint, error)) {
    const std::string name = entry.path().filename().string();
    if (!named.count(name) && entry.is_regular_file(error) && fs::remove(entry.path(), error)) removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

PartsCheckpoint::PartsCheckpoint(std::string checkpoint, const std::vector<char>& index)
    : path_(std::move(checkpoint)), index_path_(parts_index_path(path_)) {
  const io::Json parsed = io::Json::parse(index.begin(), index.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object())
    refuse(index_path_, "corrupt: the index is not a JSON object");
  if (!parsed.contains(kIndexKey) || parsed[kIndexKey] != kIndexVersion)
    refuse(index_path_, std::string("not the index of a checkpoint in parts of this version (") + kIndexKey + " " +
                            std::to_string(kIndexVersion) + ")");
  if (!parsed.contains("id") || !parsed["id"].is_string()) refuse(index_path_, "corrupt: the index has no id");
  id_ = parsed["id"].get<std::string>();
  if (!parsed.contains("mpiddp_checkpoint") || !parsed["mpiddp_checkpoint"].is_object())
    refuse(index_path_, "corrupt: the index has no mpiddp_checkpoint object");
  state_ = parsed["mpiddp_checkpoint"];
  if (parsed.contains("vocabulary")) {
    if (!parsed["vocabulary"].is_string()) refuse(index_path_, "corrupt: its vocabulary is not text");
    vocabulary_ = parsed["vocabulary"].get<std::string>();
  }
  if (!parsed.contains("parts") || !parsed["parts"].is_array() || parsed["parts"].empty())
    refuse(index_path_, "corrupt: the index names no parts");
  for (const auto& f : parsed["parts"]) {
    // A plain name in the checkpoint's directory: an index must not reach files elsewhere.
    if (!f.is_string() || f.get<std::string>().empty() || f.get<std::string>().find('/') != std::string::npos ||
        f.get<std::string>()[0] == '.')
      refuse(index_path_, "corrupt: a part's name " + f.dump() + " is not a file name in the checkpoint's directory");
    part_files_.push_back(f.get<std::string>());
  }
  if (!parsed.contains("tensors") || !parsed["tensors"].is_object())
    refuse(index_path_, "corrupt: the index has no tensors");
  const int64_t parts = static_cast<int64_t>(part_files_.size());
  for (auto it = parsed["tensors"].begin(); it != parsed["tensors"].end(); ++it) {
    const std::string where = "tensor '" + it.key() + "'";
    const io::Json& entry = it.value();
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() || !entry.contains("shape") ||
        !entry["shape"].is_array() || !entry.contains("slices") || !entry["slices"].is_array())
      refuse(index_path_, "corrupt: " + where + " needs a dtype, a shape and slices");
    Tensor tensor;
    tensor.dtype = dtype_from_name(entry["dtype"].get<std::string>(), index_path_, where);
    tensor.elements = 1;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) refuse(index_path_, "corrupt: " + where + " has the shape " + entry["shape"].dump());
      // Checked before it multiplies, so that no product of extents wraps.
      const uint64_t extent = d.get<uint64_t>();
      if (extent != 0 && static_cast<uint64_t>(tensor.elements) > kMaxTensorElements / extent)
        refuse(index_path_, "corrupt: " + where + " of shape " + entry["shape"].dump() + " is impossibly large");
      tensor.shape.push_back(static_cast<int64_t>(extent));
      tensor.elements *= static_cast<int64_t>(extent);
    }
    for (const auto& s : entry["slices"]) {
      if (!s.is_object()) refuse(index_path_, "corrupt: a slice of " + where + " is not an object");
      Tensor::Slice slice;
      slice.part = static_cast<int>(index_integer(s, "part", 0, parts - 1, index_path_, "a slice of " + where));
      slice.begin = index_integer(s, "begin", 0, tensor.elements, index_path_, "a slice of " + where);
      slice.end = index_integer(s, "end", slice.begin + 1, tensor.elements, index_path_, "a slice of " + where);
      const auto checksum = s.find("checksum");
      if (checksum == s.end() || !checksum->is_string() || checksum->get<std::string>().size() != 16 ||
          checksum->get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos)
        refuse(index_path_, "corrupt: a slice of " + where + " has no checksum of 16 hex digits");
      slice.checksum = std::stoull(checksum->get<std::string>(), nullptr, 16);
      tensor.slices.push_back(slice);
    }
    // Sorted by their first element, the slices must cover the tensor once: each begins where
    // the one before ended.
    std::sort(tensor.slices.begin(), tensor.slices.end(),
              [](const Tensor::Slice& a, const Tensor::Slice& b) { return a.begin < b.begin; });
    int64_t covered = 0;
    for (size_t i = 0; i < tensor.slices.size(); ++i) {
      const auto& s = tensor.slices[i];
      if (s.begin < covered)
        refuse(index_path_, where + ": its slices " + range_text(tensor.slices[i - 1].begin, tensor.slices[i - 1].end) +
                                " in '" + part_files_[tensor.slices[i - 1].part] + "' and " + range_text(s.begin, s.end) +
                                " in '" + part_files_[s.part] + "' overlap");
      if (s.begin > covered)
        refuse(index_path_, where + ": its elements " + range_text(covered, s.begin) + " are in no part");
      covered = s.end;
    }
    if (covered != tensor.elements)
      refuse(index_path_, where + ": its elements " + range_text(covered, tensor.elements) + " are in no part");
    order_.push_back(it.key());
    tensors_.emplace(it.key(), std::move(tensor));
  }
}

io::SafetensorsReader& PartsCheckpoint::part(int index) {
  // One part open at a time: a rank reads every part's parameters, and a checkpoint of a
  // thousand ranks would otherwise hold a thousand files open.
  if (reader_ && reader_index_ == index) return *reader_;
  reader_.reset();
  const std::string file = (fs::path(path_) / part_files_[static_cast<size_t>(index)]).string();
  std::error_code error;
  if (!fs::is_regular_file(file, error))
    refuse(file, "a missing part: the index '" + index_path_ + "' names it as part " + std::to_string(index) + " of " +
                     std::to_string(part_files_.size()));
  auto reader = std::make_unique<io::SafetensorsReader>(file, kExitCheckpoint);
  const auto meta = reader->metadata().find(kPartMetadataKey);
  const io::Json identity = meta == reader->metadata().end()
                                ? io::Json()
                                : io::Json::parse(meta->second, nullptr, /*allow_exceptions=*/false);
  if (!identity.is_object() || !identity.contains("id") || !identity["id"].is_string() || !identity.contains("part"))
    refuse(file, "not a part of a checkpoint: it has no mpiddp_checkpoint_part metadata");
  if (identity["id"] != id_)
    refuse(file, "a part of another checkpoint: its id is " + identity["id"].get<std::string>() +
                     ", the index '" + index_path_ + "' is of the write " + id_);
  if (identity["part"] != index)
    refuse(file, "it says it is part " + identity["part"].dump() + ", the index '" + index_path_ +
                     "' names it as part " + std::to_string(index));
  reader_ = std::move(reader);
  reader_index_ = index;
  return *reader_;
}

template <typename T>
void PartsCheckpoint::read(const std::string& name, int64_t begin, int64_t end, T* out) {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) refuse(index_path_, "it lacks the tensor '" + name + "'");
  const Tensor& tensor = found->second;
  const bool counter = tensor.dtype == io::TensorDtype::kI64;
  if (counter != std::is_same_v<T, int64_t>)
    refuse(index_path_, "tensor '" + name + "' is " + io::dtype_name(tensor.dtype) + ", but the model's is " +
                            (counter ? "a real tensor" : "a counter (I64)"));
  if (begin < 0 || end > tensor.elements || begin > end)
    refuse(index_path_, "tensor '" + name + "' has " + std::to_string(tensor.elements) + " elements, not " +
                            range_text(begin, end));
  const size_t value_bytes = io::dtype_size(tensor.dtype);
  for (const auto& slice : tensor.slices) {
    const int64_t lo = std::max(begin, slice.begin), hi = std::min(end, slice.end);
    if (lo >= hi) continue;
    io::SafetensorsReader& reader = part(slice.part);
    reader.read_bytes(stored_slice(name, tensor, slice), bytes_);
    if (fnv1a(bytes_.data(), bytes_.size()) != slice.checksum)
      refuse(reader.name(), "corrupt: the slice " + range_text(slice.begin, slice.end) + " of tensor '" + name +
                                "' does not match its checksum in the index (the part was damaged after it was "
                                "written)");
    io::convert_values(bytes_.data() + (lo - slice.begin) * value_bytes, tensor.dtype, hi - lo, out + (lo - begin));
  }
}

void PartsCheckpoint::check_stored(const std::string& name) {
  const Tensor& tensor = tensors_.at(name);
  for (const auto& slice : tensor.slices) stored_slice(name, tensor, slice);
}

const io::StoredTensor& PartsCheckpoint::stored_slice(const std::string& name, const Tensor& tensor,
                                                      const Tensor::Slice& slice) {
  io::SafetensorsReader& reader = part(slice.part);
  const io::StoredTensor* stored = reader.find(name);
  if (!stored || stored->dtype != tensor.dtype || stored->shape != std::vector<int64_t>{slice.end - slice.begin})
    refuse(reader.name(), "it lacks the slice " + range_text(slice.begin, slice.end) + " of tensor '" + name +
                              "' as " + io::dtype_name(tensor.dtype) + " [" + std::to_string(slice.end - slice.begin) +
                              "] that the index names");
  return *stored;
}

template <typename T>
TrainingPosition restore_parts(PartsCheckpoint& checkpoint, const RunIdentity& identity, nn::Model<T>& model,
                               optim::UpdateRule<T>& local, Index local_begin) {
  const std::string index = parts_index_path(checkpoint.path());
  const io::Json& state = checkpoint.state();
  if (!state.contains("format") || state["format"] != detail::kFormatVersion)
    refuse(index, "format version " + (state.contains("format") ? state["format"].dump() : std::string("(none)")) +
                      " is not " + std::to_string(detail::kFormatVersion) + " (written by another mpiddp version)");
  try {
    const TrainingPosition position = detail::resume_position(state, identity, index);
    detail::check_vocabulary(checkpoint.vocabulary(), identity, index);

    // The index holds exactly the model's tensors and the optimizer's, in the model's shapes.
    // The optimizer's buffers are the writer's (checked equal to this run's by the config):
    // this rank's part may be empty, and a rule over an empty part holds none.
    std::vector<std::string> buffer_names;
    for (const auto& name : state.at("optimizer_buffers")) buffer_names.push_back(name.get<std::string>());
    const auto buffers = local.state_buffers();
    for (const auto& buffer : buffers)
      if (std::find(buffer_names.begin(), buffer_names.end(), buffer.name) == buffer_names.end())
        refuse(index, "it lacks the optimizer's state '" + buffer.name + "'");
    std::map<std::string, std::vector<int64_t>> expected;
    for (auto& [name, shape] : state_tensors(model, buffer_names)) expected[name] = std::move(shape);
    std::string missing, extra;
    for (const auto& [name, shape] : expected) {
      const auto found = checkpoint.tensors().find(name);
      if (found == checkpoint.tensors().end())
        missing += (missing.empty() ? "'" : ", '") + name + "'";
      else if (found->second.shape != shape)
        refuse(index, "tensor '" + name + "' is " + io::shape_text(found->second.shape) + " but the model's is " +
                          io::shape_text(shape));
    }
    for (const auto& [name, tensor] : checkpoint.tensors())
      if (!expected.count(name)) extra += (extra.empty() ? "'" : ", '") + name + "'";
    if (!missing.empty()) refuse(index, "it lacks the tensors " + missing);
    if (!extra.empty()) refuse(index, "it has tensors the model does not have: " + extra);

    // The parameters the model holds: all P, or its part (Model::parameter_part).
    const Index held_begin = model.parameter_part_begin(), held_end = model.parameter_part_end();
    for (const auto& t : model.tensors()) {
      const Index lo = std::max(held_begin, t.offset), hi = std::min(held_end, t.offset + t.size());
      if (lo < hi) checkpoint.read(t.name, lo - t.offset, hi - t.offset, model.parameter_part() + (lo - held_begin));
    }
    for (const auto& b : buffer_layout(model.buffer_tensors(), nn::BufferType::kReal))
      checkpoint.read(b.name, 0, b.size(), model.buffer_values() + b.offset);
    for (const auto& b : buffer_layout(model.buffer_tensors(), nn::BufferType::kInt64))
      checkpoint.read(b.name, 0, b.size(), model.buffer_counters() + b.offset);
    // Of the optimizer's state, only the part this rank holds.
    for (const auto& buffer : buffers) {
      const Index local_end = local_begin + static_cast<Index>(buffer.values->size());
      for (const auto& t : model.tensors()) {
        const Index lo = std::max(local_begin, t.offset), hi = std::min(local_end, t.offset + t.size());
        if (lo < hi)
          checkpoint.read(kOptimizerPrefix + buffer.name + "." + t.name, lo - t.offset, hi - t.offset,
                          buffer.values->data() + (lo - local_begin));
      }
    }
    local.set_steps(checkpoint_integer(state, "optimizer_steps", index));
    return position;
  } catch (const io::Json::exception& e) {
    refuse(index, std::string("corrupt: its mpiddp_checkpoint metadata lacks a field (") + e.what() + ")");
  }
}

size_t export_parts_weights(const std::string& checkpoint, const std::string& weights) {
  const std::string index_path = parts_index_path(checkpoint);
  PartsCheckpoint parts(checkpoint, io::read_whole_file(index_path, kExitCheckpoint, "mpiddp export"));
  // The parameters under their names, and the average of ema.decay under the parameters' names.
  std::vector<io::TensorToWrite> parameters, average;
  std::vector<std::string> parameter_names, average_names;
  for (const auto& name : parts.names()) {
    const auto& tensor = parts.tensors().at(name);
    const detail::Exported exported = detail::exported_as(name);
    if (exported.as == detail::ExportedAs::kNothing) continue;
    const bool weight = exported.as == detail::ExportedAs::kWeight;
    (weight ? parameters : average).push_back({exported.name, tensor.dtype, tensor.shape, nullptr});
    (weight ? parameter_names : average_names).push_back(name);
  }
  const auto metadata = detail::exported_metadata(parts.state(), parts.vocabulary(), checkpoint, index_path);
  // One tensor at a time: the header first, then each tensor assembled from its slices.
  auto write = [&](const std::string& path, const std::vector<io::TensorToWrite>& tensors,
                   const std::vector<std::string>& names) {
    const std::vector<char> header = io::encode_safetensors_header(tensors, metadata);
    io::write_file_atomically(path, [&](const io::AppendBytes& append) {
      append(header.data(), header.size());
      std::vector<char> values;
      for (size_t i = 0; i < tensors.size(); ++i) {
        const auto& tensor = parts.tensors().at(names[i]);
        // The slices are in the parts as the index says before their tensor's memory is
        // taken: a hostile index's shape cannot make it larger than the parts.
        parts.check_stored(names[i]);
        values.resize(io::tensor_bytes(tensors[i]));
        switch (tensor.dtype) {
          case io::TensorDtype::kF32: parts.read(names[i], 0, tensor.elements, reinterpret_cast<float*>(values.data())); break;
          case io::TensorDtype::kF64: parts.read(names[i], 0, tensor.elements, reinterpret_cast<double*>(values.data())); break;
          case io::TensorDtype::kI64: parts.read(names[i], 0, tensor.elements, reinterpret_cast<int64_t*>(values.data())); break;
        }
        append(values.data(), values.size());
      }
    });
  };
  write(weights, parameters, parameter_names);
  if (!average.empty()) write(average_weights_path(weights), average, average_names);
  return parameters.size();
}

#define MPIDDP_INSTANTIATE(T)                                                                               \
  template io::Json write_part<T>(const PartToWrite&, const nn::Model<T>&, optim::UpdateRule<T>&, Index); \
  template TrainingPosition restore_parts<T>(PartsCheckpoint&, const RunIdentity&, nn::Model<T>&,          \
                                             optim::UpdateRule<T>&, Index);                                \
  template void write_parts_index<T>(const std::string&, const std::string&, const TrainingPosition&,      \
                                     const RunIdentity&, const nn::Model<T>&, optim::UpdateRule<T>&,        \
                                     const std::vector<io::Json>&, const std::function<void()>&);          \
  template void PartsCheckpoint::read<T>(const std::string&, int64_t, int64_t, T*);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE
template void PartsCheckpoint::read<int64_t>(const std::string&, int64_t, int64_t, int64_t*);

}  // namespace mpiddp::checkpoint
