#include "mpiddp/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/io/atomic_file.hpp"

namespace mpiddp::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

// The reference implementation's limit: a longer header is a damaged length field, not a model.
constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;
constexpr const char* kMetadataKey = "__metadata__";

}  // namespace

const char* dtype_name(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::kF32: return "F32";
    case TensorDtype::kF64: return "F64";
    case TensorDtype::kI64: return "I64";
  }
  return "?";
}
size_t dtype_size(TensorDtype dtype) { return dtype == TensorDtype::kF32 ? 4 : 8; }
template <>
TensorDtype dtype_of<float>() { return TensorDtype::kF32; }
template <>
TensorDtype dtype_of<double>() { return TensorDtype::kF64; }
template <>
TensorDtype dtype_of<int64_t>() { return TensorDtype::kI64; }

size_t tensor_bytes(const TensorToWrite& tensor) {
  size_t bytes = dtype_size(tensor.dtype);
  for (int64_t d : tensor.shape) bytes *= static_cast<size_t>(d);
  return bytes;
}

int64_t StoredTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

namespace {

// The tensors and metadata of a header (the `header_bytes` bytes at `header`), validated
// against a data section of `data_bytes` bytes: known dtypes, shapes whose sizes match their
// byte ranges, ranges inside the data section that cover it without overlaps or gaps.
// fail(problem) throws.
template <typename Fail>
void parse_layout(const char* header_text, uint64_t header_bytes, uint64_t data_bytes, Fail fail,
                  std::vector<StoredTensor>& tensors, std::map<std::string, std::string>& metadata) {
  const auto header = nlohmann::ordered_json::parse(header_text, header_text + header_bytes,
                                                    nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail("the header is not valid JSON (damaged file?)");
  if (!header.is_object()) fail("the header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const auto& entry = it.value();
    if (key == kMetadataKey) {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string()) fail("__metadata__." + m.key() + " is not a string");
        metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "': ";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets") || entry.size() != 3)
      fail(where + "expected exactly the keys dtype, shape and data_offsets");
    StoredTensor t;
    t.name = key;
    if (!entry["dtype"].is_string()) fail(where + "dtype is not a string");
    const std::string dtype = entry["dtype"].get<std::string>();
    if (dtype == "F32") {
      t.dtype = TensorDtype::kF32;
    } else if (dtype == "F64") {
      t.dtype = TensorDtype::kF64;
    } else if (dtype == "I64") {
      t.dtype = TensorDtype::kI64;  // counters such as BatchNorm's num_batches_tracked
    } else {
      fail(where + "dtype " + dtype + " is not supported; expected F32, F64 or I64 (convert "
                   "with tensor.float() or tensor.double() before saving)");
    }
    const auto& shape = entry["shape"];
    if (!shape.is_array()) fail(where + "shape is not a list");
    // The element count is built up with an overflow check: a damaged shape must not wrap.
    uint64_t elements = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) fail(where + "shape " + shape.dump() + " has a non-integer or negative size");
      const uint64_t extent = d.get<uint64_t>();
      if (extent != 0 && elements > (std::numeric_limits<uint64_t>::max() / 8) / extent)
        fail(where + "shape " + shape.dump() + " is impossibly large");
      elements *= extent;
      t.shape.push_back(static_cast<int64_t>(extent));
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      fail(where + "data_offsets must be two non-negative integers, got " + offsets.dump());
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end) fail(where + "data_offsets " + offsets.dump() + " end before they begin");
    if (end > data_bytes)
      fail("truncated or damaged: " + where + "data ends at byte " + std::to_string(end) +
           " of the data section, which has only " + std::to_string(data_bytes) + " bytes");
    const uint64_t expected = elements * dtype_size(t.dtype);
    if (end - begin != expected)
      fail(where + "shape " + shape_text(t.shape) + " of " + dtype + " needs " +
           std::to_string(expected) + " bytes but data_offsets " + offsets.dump() + " span " +
           std::to_string(end - begin));
    t.begin = begin;
    t.end = end;
    tensors.push_back(std::move(t));
  }

  // Sorted by position, every tensor must start where the previous one ended: no overlaps
  // (two tensors sharing bytes) and no gaps (bytes of a lost or renamed tensor).
  std::vector<const StoredTensor*> by_offset;
  for (const auto& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const StoredTensor* a, const StoredTensor* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  size_t position = 0;
  const StoredTensor* previous = nullptr;
  for (const StoredTensor* t : by_offset) {
    if (t->begin < position)
      fail("tensors '" + previous->name + "' and '" + t->name + "' overlap (bytes " +
           std::to_string(t->begin) + ".." + std::to_string(position) + ")");
    if (t->begin > position)
      fail("bytes " + std::to_string(position) + ".." + std::to_string(t->begin) +
           " of the data section belong to no tensor");
    position = t->end;
    previous = t;
  }
  if (position != data_bytes)
    fail("the data section has " + std::to_string(data_bytes - position) +
         " bytes after the last tensor (damaged file?)");
}

const StoredTensor* find_tensor(const std::vector<StoredTensor>& tensors, const std::string& name) {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// The header's length from a file's first 8 bytes, checked against the file's size.
template <typename Fail>
uint64_t header_length(const char* first8, uint64_t size, Fail fail) {
  if (size < 8) fail("truncated: " + std::to_string(size) + " bytes, less than the 8-byte header length");
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, first8, 8);
  if (header_bytes > kMaxSafetensorsHeader)
    fail("header length " + std::to_string(header_bytes) + " exceeds the limit of " +
         std::to_string(kMaxSafetensorsHeader) + " bytes (not a safetensors file, or damaged)");
  if (header_bytes > size - 8)
    fail("truncated: the header length says " + std::to_string(header_bytes) +
         " bytes but only " + std::to_string(size - 8) + " follow");
  return header_bytes;
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::vector<char> bytes, std::string name, int error_code)
    : bytes_(std::move(bytes)), base_(bytes_.data()), size_(bytes_.size()), name_(std::move(name)) {
  parse(error_code);
}

SafetensorsFile::SafetensorsFile(std::shared_ptr<const char> mapped, size_t size, std::string name, int error_code)
    : mapped_(std::move(mapped)), base_(mapped_.get()), size_(size), name_(std::move(name)) {
  parse(error_code);
}

void SafetensorsFile::parse(int error_code) {
  auto fail = [&](const std::string& problem) {
    throw Error(static_cast<ExitCode>(error_code), "safetensors file '" + name_ + "': " + problem);
  };
  const uint64_t header_bytes = header_length(base_, size_, fail);
  data_start_ = 8 + header_bytes;
  parse_layout(base_ + 8, header_bytes, size_ - data_start_, fail, tensors_, metadata_);
}

void SafetensorsFile::give_back(const char* from, const char* to) const {
  if (!mapped_) return;
  // The whole pages of [from, to): a page shared with bytes beside the range stays. The file's
  // pages stay in the page cache, and the mapping is read-only, so a later read of them finds
  // the same bytes.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto first = (reinterpret_cast<uintptr_t>(from) + page - 1) / page * page;
  const auto last = reinterpret_cast<uintptr_t>(to) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

uint64_t SafetensorsFile::data_checksum() const {
  if (!mapped_) return fnv1a(data(), data_bytes());
  // Chunks of the mapping: each is hashed, then its pages are given back, so the checksum of a
  // file of many GB leaves about one chunk resident (and a page at each chunk's boundary).
  constexpr size_t kChunk = size_t{64} << 20;
  uint64_t hash = fnv1a(nullptr, 0);
  for (size_t at = 0; at < data_bytes();) {
    const size_t end = std::min(data_bytes(), at + kChunk);
    hash = fnv1a(data() + at, end - at, hash);
    give_back(data() + at, data() + end);
    at = end;
  }
  return hash;
}

SafetensorsReader::SafetensorsReader(std::string path, int error_code)
    : name_(std::move(path)), error_code_(error_code) {
  auto fail = [&](const std::string& problem) {
    throw Error(static_cast<ExitCode>(error_code_), "safetensors file '" + name_ + "': " + problem);
  };
  file_.open(name_, std::ios::binary | std::ios::ate);
  if (!file_) fail(std::string("cannot open: ") + std::strerror(errno));
  const std::streamsize size = file_.tellg();
  if (size < 0) fail("cannot read (is it a directory?)");
  char first8[8] = {};
  file_.seekg(0);
  if (size >= 8 && !file_.read(first8, 8)) fail("cannot read its first 8 bytes");
  const uint64_t header_bytes = header_length(first8, static_cast<uint64_t>(size), fail);
  std::vector<char> header(header_bytes);
  if (!file_.read(header.data(), static_cast<std::streamsize>(header_bytes))) fail("cannot read its header");
  data_start_ = 8 + header_bytes;
  parse_layout(header.data(), header_bytes, static_cast<uint64_t>(size) - data_start_, fail, tensors_, metadata_);
}

const StoredTensor* SafetensorsReader::find(const std::string& tensor_name) const {
  return find_tensor(tensors_, tensor_name);
}

void SafetensorsReader::read_bytes(const StoredTensor& tensor, std::vector<char>& out) {
  out.resize(tensor.end - tensor.begin);
  file_.clear();
  file_.seekg(static_cast<std::streamoff>(data_start_ + tensor.begin));
  if (!file_.read(out.data(), static_cast<std::streamsize>(out.size())))
    throw Error(static_cast<ExitCode>(error_code_), "safetensors file '" + name_ + "': cannot read tensor '" +
                                                        tensor.name + "' (truncated while read?)");
}

const StoredTensor* SafetensorsFile::find(const std::string& tensor_name) const {
  return find_tensor(tensors_, tensor_name);
}

namespace {

// memcpy per value: the data section gives no alignment guarantee for other writers' files.
template <typename Stored, typename T>
void convert(const char* source, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) {
    Stored value;
    std::memcpy(&value, source + sizeof(Stored) * i, sizeof(Stored));
    out[i] = static_cast<T>(value);
  }
}

}  // namespace

template <typename T>
void convert_values(const char* source, TensorDtype dtype, int64_t n, T* out) {
  switch (dtype) {
    case TensorDtype::kF32: convert<float>(source, n, out); break;
    case TensorDtype::kF64: convert<double>(source, n, out); break;
    case TensorDtype::kI64: convert<int64_t>(source, n, out); break;
  }
}

template void convert_values<float>(const char*, TensorDtype, int64_t, float*);
template void convert_values<double>(const char*, TensorDtype, int64_t, double*);
template void convert_values<int64_t>(const char*, TensorDtype, int64_t, int64_t*);

template <typename T>
void SafetensorsFile::read(const StoredTensor& tensor, T* out) const {
  read_range(tensor, 0, tensor.elements(), out);
}

template <typename T>
void SafetensorsFile::read_range(const StoredTensor& tensor, int64_t first, int64_t count, T* out) const {
  const size_t element = dtype_size(tensor.dtype);
  const char* from = data() + tensor.begin + static_cast<size_t>(first) * element;
  convert_values(from, tensor.dtype, count, out);
  // Read once into the caller's memory: a mapped file's pages need not stay in this process.
  give_back(from, from + static_cast<size_t>(count) * element);
}

template void SafetensorsFile::read_range<float>(const StoredTensor&, int64_t, int64_t, float*) const;
template void SafetensorsFile::read_range<double>(const StoredTensor&, int64_t, int64_t, double*) const;
template void SafetensorsFile::read_range<int64_t>(const StoredTensor&, int64_t, int64_t, int64_t*) const;
template void SafetensorsFile::read<float>(const StoredTensor&, float*) const;
template void SafetensorsFile::read<int64_t>(const StoredTensor&, int64_t*) const;
template void SafetensorsFile::read<double>(const StoredTensor&, double*) const;

SafetensorsFile read_safetensors(const std::string& path, int error_code,
                                 const std::string& role) {
  return SafetensorsFile(read_whole_file(path, error_code, role), path, error_code);
}

SafetensorsFile map_safetensors(const std::string& path, int error_code, const std::string& role) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  const bool regular = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  void* base = regular ? ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  if (fd >= 0) ::close(fd);  // the mapping stays
  // What cannot be mapped (missing, a directory, empty) is read as read_safetensors reads it,
  // for its error.
  if (base == MAP_FAILED) return read_safetensors(path, error_code, role);
  const auto size = static_cast<size_t>(st.st_size);
  std::shared_ptr<const char> mapped(static_cast<const char*>(base),
                                     [size](const char* p) { ::munmap(const_cast<char*>(p), size); });
  return SafetensorsFile(std::move(mapped), size, path, error_code);
}

std::vector<char> encode_safetensors_header(const std::vector<TensorToWrite>& tensors,
                                            const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  size_t offset = 0;
  for (const auto& t : tensors) {
    const size_t bytes = tensor_bytes(t);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  const uint64_t header_bytes = text.size();
  std::vector<char> encoded(8 + text.size());
  std::memcpy(encoded.data(), &header_bytes, 8);
  std::memcpy(encoded.data() + 8, text.data(), text.size());
  return encoded;
}

std::vector<char> encode_safetensors(const std::vector<TensorToWrite>& tensors,
                                     const std::map<std::string, std::string>& metadata) {
  std::vector<char> file = encode_safetensors_header(tensors, metadata);
  for (const auto& t : tensors) {
    const size_t bytes = tensor_bytes(t);
    if (bytes) file.insert(file.end(), static_cast<const char*>(t.data), static_cast<const char*>(t.data) + bytes);
  }
  return file;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::function<void()>& before_rename) {
  // The header, then each tensor's bytes where they lie: the data is never copied.
  const std::vector<char> header = encode_safetensors_header(tensors, metadata);
  std::vector<ByteSpan> pieces = {{header.data(), header.size()}};
  for (const auto& t : tensors) pieces.push_back({t.data, tensor_bytes(t)});
  write_file_atomically(path, pieces, before_rename);
}

}  // namespace mpiddp::io
