#pragma once
// Checkpoints in parts (checkpoint.format "parts"): a directory per checkpoint, in which each
// rank writes its own part of the parameters and of the optimizer state, so that no rank
// gathers the whole state to write it, and a run resumes from it at any world size:
//
//   <dir>/step-000000000016.parts/           (the best one: <dir>/best.parts/)
//     index.json                               the checkpoint: written last, by rank 0, atomically
//     part-00000-of-00002-<id>.safetensors     a rank's part: slices of tensors, by name
//     part-00001-of-00002-<id>.safetensors
//
// Note [checkpoints in parts] in src/checkpoint/checkpoint_parts.cpp says why it is laid out so;
// docs/checkpoints.md describes it for users. Nothing here talks to other ranks: the trainer's
// checkpointer (train/checkpointer.hpp) decides which rank writes which part and gathers the
// parts' descriptions for the index.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/io/safetensors.hpp"

namespace mpiddp::checkpoint {

// "<dir>/step-000000000016.parts", "<dir>/best.parts"
std::string parts_checkpoint_path(const std::string& dir, int64_t step);
std::string best_parts_path(const std::string& dir);
// "<checkpoint>/index.json"
std::string parts_index_path(const std::string& checkpoint);
// Whether `path` is a checkpoint in parts: a directory holding its index.
bool is_parts_checkpoint(const std::string& path);

// What one rank writes of a checkpoint in parts.
struct PartToWrite {
  std::string checkpoint;  // the checkpoint's directory, which exists
  // The write's id (parts_write_id): in the part's file name and in its metadata, so that a
  // part of another checkpoint is never taken for this one's.
  std::string id;
  int part = 0, parts = 1;  // which part of how many
  Index begin = 0, end = 0;  // the elements of the flat parameter buffer it holds
  bool buffers = false;      // the model's buffers (BatchNorm's statistics) too: one part has them
};

// The id of the write of the checkpoint `checkpoint` (a path) at `step` by the run `identity`:
// 16 hex digits, the same on every rank given the same nonce (rank 0's draw, shared), and
// another for another write.
std::string parts_write_id(const RunIdentity& identity, const std::string& checkpoint, int64_t step,
                           uint64_t nonce);

// Writes one part (atomically): of each tensor, the parameters and each optimizer state
// buffer's values in [part.begin, part.end), stored unpadded under the tensor's name (the
// state's as "optimizer.<buffer>.<name>"), 1-D. local: the optimizer state this rank holds,
// for the parameters from local_begin on; it must cover the part. Returns the part's
// description for the index (its file, and each slice's place and checksum).
template <typename T>
io::Json write_part(const PartToWrite& part, const nn::Model<T>& model, optim::UpdateRule<T>& local,
                    Index local_begin);

// Once every part is written (parts: their descriptions, in part order), the checkpoint's
// index: its metadata (as a file checkpoint's: the position, the run's identity, the
// optimizer's step count and state buffers' names), and each tensor's dtype, shape and slices.
// Written atomically, before_rename just before its rename (the crash tests' probe): the
// checkpoint exists only once the index is in place. Then the files of the directory that the
// index does not name (an earlier best's parts) are removed.
// The tensors are listed in a file checkpoint's order (of `model` and `local`'s state buffers).
template <typename T>
void write_parts_index(const std::string& checkpoint, const std::string& id, const TrainingPosition& position,
                       const RunIdentity& identity, const nn::Model<T>& model, optim::UpdateRule<T>& local,
                       const std::vector<io::Json>& parts, const std::function<void()>& before_rename);

// Removes the files of the checkpoint's directory that its index does not name (the parts of
// an earlier or a killed write of the best checkpoint, temporary files); returns their names.
// Rank 0, when no other rank writes there.
std::vector<std::string> remove_unindexed_files(const std::string& checkpoint);

// A checkpoint in parts opened for reading: the index is read and checked (every tensor's
// slices cover it once, every part file it names is one of its parts); each part file is
// opened when first read, and checked to be this checkpoint's. Every refusal is
// Error(kExitCheckpoint) naming the file.
class PartsCheckpoint {
 public:
  // checkpoint: the directory; index: its index.json's bytes.
  PartsCheckpoint(std::string checkpoint, const std::vector<char>& index);
  const std::string& path() const { return path_; }
  // The metadata, as a file checkpoint's "mpiddp_checkpoint" (without its data checksum).
  const io::Json& state() const { return state_; }
  // The tokenizer the checkpoint carries (checkpoint/vocabulary.hpp), or "".
  const std::string& vocabulary() const { return vocabulary_; }

  struct Tensor {
    io::TensorDtype dtype = io::TensorDtype::kF32;
    std::vector<int64_t> shape;
    int64_t elements = 0;
    struct Slice {
      int part = 0;
      int64_t begin = 0, end = 0;  // elements of the tensor
      uint64_t checksum = 0;       // of its bytes as stored
    };
    std::vector<Slice> slices;  // in order, covering [0, elements) once
  };
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  // Their names in the index's order.
  const std::vector<std::string>& names() const { return order_; }
  // The part files it names, in part order.
  const std::vector<std::string>& part_files() const { return part_files_; }

  // Elements [begin, end) of the tensor `name` into out, from the slices that hold them, each
  // slice checked against its checksum. T = int64_t reads counters, and only counters.
  template <typename T>
  void read(const std::string& name, int64_t begin, int64_t end, T* out);
  // Checks that the parts hold each slice of the tensor `name` as the index says (their
  // headers only), so that a tensor's memory is taken only for what the parts hold.
  void check_stored(const std::string& name);

 private:
  io::SafetensorsReader& part(int index);
  // The part's stored tensor of `slice` of the tensor `name`; refused when the part lacks it
  // or holds another dtype or length.
  const io::StoredTensor& stored_slice(const std::string& name, const Tensor& tensor, const Tensor::Slice& slice);

  std::string path_;
  std::string index_path_;
  std::string id_;
  io::Json state_;
  std::string vocabulary_;
  std::vector<std::string> part_files_;
  std::unique_ptr<io::SafetensorsReader> reader_;  // the part read last, open
  int reader_index_ = -1;
  std::map<std::string, Tensor> tensors_;
  std::vector<std::string> order_;
  std::vector<char> bytes_;  // a slice as stored, reused
};

// Checks the checkpoint against this run (as restore_checkpoint does a file's) and restores
// all the parameters and buffers, and the optimizer state of the parameters from local_begin
// on that `local` holds. Returns where training continues.
template <typename T>
TrainingPosition restore_parts(PartsCheckpoint& checkpoint, const RunIdentity& identity, nn::Model<T>& model,
                               optim::UpdateRule<T>& local, Index local_begin);

// mpiddp export of a checkpoint in parts: the weights file export_checkpoint_weights writes of
// a file checkpoint, assembled from the parts one tensor at a time. Returns the tensors written.
size_t export_parts_weights(const std::string& checkpoint, const std::string& weights);

}  // namespace mpiddp::checkpoint
