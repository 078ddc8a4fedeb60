#pragma once
// The safetensors format (github.com/huggingface/safetensors), F32, F64 and I64 only:
//
//   bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
//   bytes [8, 8+N)      a JSON object: name -> {"dtype": "F32"|"F64", "shape": [...],
//                       "data_offsets": [begin, end]} (I64: counters, e.g. BatchNorm's
//                       num_batches_tracked), plus an optional "__metadata__"
//                       object of string -> string
//   bytes [8+N, end)    the data section; offsets are relative to its start, tensors are
//                       row-major little-endian and together cover it without gaps
//
// Reading validates all of it (bounded header, known dtypes, offsets inside the file,
// shape x dtype size = byte range, no overlaps, no gaps), so a truncated or damaged file is
// an error that names the file and the problem, never a crash.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mpiddp::io {

enum class TensorDtype { kF32, kF64, kI64 };

const char* dtype_name(TensorDtype dtype);    // "F32" | "F64" | "I64"
size_t dtype_size(TensorDtype dtype);         // 4 | 8 | 8
template <typename T>
TensorDtype dtype_of();  // float -> kF32, double -> kF64, int64_t -> kI64

// A tensor to write: `data` holds prod(shape) values of `dtype` in native (little-endian) order.
struct TensorToWrite {
  std::string name;
  TensorDtype dtype;
  std::vector<int64_t> shape;
  const void* data;
};

// prod(shape) * dtype_size(dtype)
size_t tensor_bytes(const TensorToWrite& tensor);

// A tensor inside a parsed file.
struct StoredTensor {
  std::string name;
  TensorDtype dtype;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;  // byte range inside the data section
  int64_t elements() const;
};

class SafetensorsFile {
 public:
  // Parses and validates a whole file's bytes; `name` (the path) is used in messages.
  // Throws Error(error_code) naming the file and the problem.
  SafetensorsFile(std::vector<char> bytes, std::string name, int error_code);
  // The same over `size` bytes at `mapped`, a read-only mapping of the file that the pointer
  // keeps alive (map_safetensors).
  SafetensorsFile(std::shared_ptr<const char> mapped, size_t size, std::string name, int error_code);
  // Moved, never copied: data() points into the bytes or the mapping held.
  SafetensorsFile(SafetensorsFile&&) = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<StoredTensor>& tensors() const { return tensors_; }  // in header order
  const StoredTensor* find(const std::string& tensor_name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The data section, for checksums.
  const char* data() const { return base_ + data_start_; }
  size_t data_bytes() const { return size_ - data_start_; }
  // fnv1a of the data section. A mapped file's pages are given back as the hash passes them,
  // so that hashing a file larger than a rank may hold keeps little of it resident.
  uint64_t data_checksum() const;

  // Copies a tensor's values into out (elements() values), converting between the dtypes
  // (the callers check that a real tensor is not read as a counter, nor the reverse).
  template <typename T>
  void read(const StoredTensor& tensor, T* out) const;
  // Values [first, first + count) of the tensor into out, converted alike: of a mapped file,
  // only their pages are read, and given back once read.
  template <typename T>
  void read_range(const StoredTensor& tensor, int64_t first, int64_t count, T* out) const;

 private:
  void parse(int error_code);
  // A mapped file: the whole pages of [from, to) dropped from this process (MADV_DONTNEED),
  // so that reading a file larger than a rank may hold keeps little of it resident.
  void give_back(const char* from, const char* to) const;

  std::vector<char> bytes_;            // the file's bytes, or empty when mapped
  std::shared_ptr<const char> mapped_;  // the mapping, or null
  const char* base_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  size_t data_start_ = 0;
  std::vector<StoredTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A file read piece by piece: its header is read and validated as SafetensorsFile's on
// construction, each tensor's bytes only when asked for, so that a file larger than memory
// can be read one tensor at a time (checkpoints in parts, checkpoint/checkpoint_parts.hpp).
class SafetensorsReader {
 public:
  // Throws Error(error_code) naming the file when it cannot be read or its header is malformed.
  SafetensorsReader(std::string path, int error_code);
  const std::string& name() const { return name_; }
  const std::vector<StoredTensor>& tensors() const { return tensors_; }  // in header order
  const StoredTensor* find(const std::string& tensor_name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor's bytes as stored (tensor.end - tensor.begin of them) into out, resized.
  void read_bytes(const StoredTensor& tensor, std::vector<char>& out);

 private:
  std::string name_;
  int error_code_;
  std::ifstream file_;
  size_t data_start_ = 0;
  std::vector<StoredTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// n values of `dtype` stored at source (little-endian, any alignment) into out, converted to T.
template <typename T>
void convert_values(const char* source, TensorDtype dtype, int64_t n, T* out);

// Reads and parses a file; Error(error_code) names it when it cannot be read or is malformed.
SafetensorsFile read_safetensors(const std::string& path, int error_code,
                                 const std::string& role = "");
// The same over a read-only mapping of the file, whose pages are read only where a tensor's
// values are (read, read_range): a rank that keeps a part of the parameters (reduce.shard
// "parameters") reads its slices of a whole model's file without holding the rest. Errors as
// read_safetensors'.
SafetensorsFile map_safetensors(const std::string& path, int error_code, const std::string& role = "");

// The header of the file that encode_safetensors would make (its first 8 + N bytes); the
// tensors' data pointers are not read.
std::vector<char> encode_safetensors_header(const std::vector<TensorToWrite>& tensors,
                                            const std::map<std::string, std::string>& metadata);
// The complete file contents for the tensors, in the given order, with the metadata.
// The header is padded with spaces so the data section starts 8-byte aligned.
std::vector<char> encode_safetensors(const std::vector<TensorToWrite>& tensors,
                                     const std::map<std::string, std::string>& metadata);

// Writes a file atomically (see io/atomic_file.hpp, and its before_rename).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::function<void()>& before_rename = nullptr);

std::string shape_text(const std::vector<int64_t>& shape);  // "[48, 6]"

}  // namespace mpiddp::io
