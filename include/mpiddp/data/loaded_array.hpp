#pragma once
// An array of a dataset in the training dtype, either pointing into a read-only mapping of
// its file (zero copy) or converted once into memory, with whatever keeps it alive.
#include <cstdint>
#include <memory>
#include <vector>

#include "mpiddp/data/element_type.hpp"
#include "mpiddp/data/input_file.hpp"

namespace mpiddp::data {

template <typename T>
struct LoadedArray {
  const T* data = nullptr;
  std::shared_ptr<const void> storage;  // a mapping or a vector
  bool mapped = false;                  // true: zero copy from the file's pages
};

// `count` values (row_width per sample) stored with `encoding` at `offset` of a plain file.
// Mapped when the file already holds T in native byte order, suitably aligned, and
// scale is 1; converted into memory otherwise. All values are checked finite either way;
// the check reads the file with pread, so it does not fault in the mapping's pages.
template <typename T>
LoadedArray<T> load_values(const InputFile& file, uint64_t offset, Encoding encoding,
                           uint64_t count, uint64_t row_width, double scale);

// The same, converted from a sequential source (a gzip stream, a file slice).
template <typename T>
LoadedArray<T> load_values(ByteSource& source, Encoding encoding, uint64_t count,
                           uint64_t row_width, double scale);

// `count` class labels in [0, classes), converted to int32.
LoadedArray<int32_t> load_labels(ByteSource& source, Encoding encoding, uint64_t count,
                                 Index classes, const LabelLayout& layout = {});

// A DataError naming the file when `bytes` of private memory exceed the machine's physical
// memory: a clear refusal instead of the OOM killer halfway through decoding. (A gzip
// file may honestly expand 1032:1, so its size alone does not bound what it claims.)
void check_fits_in_memory(uint64_t bytes, const std::string& file);

// One owner for several arrays, for Dataset::storage.
std::shared_ptr<const void> keep_together(std::vector<std::shared_ptr<const void>> parts);

}  // namespace mpiddp::data
