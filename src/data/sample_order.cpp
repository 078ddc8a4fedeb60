#include "mpiddp/data/sample_order.hpp"

#include <cstring>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/npy.hpp"
#include "mpiddp/distributed/rank0_io.hpp"

namespace mpiddp::data {

namespace {

// Reads the int64 [rows, columns] array as the bytes of [rows, columns, values...] (int64),
// the form rank 0 broadcasts.
std::vector<char> read_order_file(const std::string& path) {
  const data::InputFile file(path);
  const data::NpyHeader header = data::read_npy_header(file);
  if (header.encoding.type != data::ElementType::kInt64)
    throw DataError(path + ": dtype " + data::element_name(header.encoding.type) +
                    "; sampler.order needs int64 (numpy: order.astype(numpy.int64))");
  if (header.shape.size() != 2)
    throw DataError(path + ": expected a 2-D array [epochs, samples], got " +
                    std::to_string(header.shape.size()) + " dimensions");
  std::vector<char> bytes((2 + header.elements) * sizeof(int64_t));
  const int64_t shape[2] = {static_cast<int64_t>(header.shape[0]),
                            static_cast<int64_t>(header.shape[1])};
  std::memcpy(bytes.data(), shape, sizeof shape);
  file.read_at(header.data_offset, bytes.data() + sizeof shape, header.elements * sizeof(int64_t));
  return bytes;
}

}  // namespace

SampleOrder::SampleOrder(const std::vector<int64_t>& values, int64_t rows, int64_t columns,
                         const std::string& path, Index samples, int64_t epochs) {
  const std::string where = "sampler.order '" + path + "': ";
  if (columns != samples)
    throw DataError(where + "rows have " + std::to_string(columns) +
                    " entries but data.train has " + std::to_string(samples) + " samples");
  if (rows < epochs)
    throw DataError(where + "has " + std::to_string(rows) + " rows but epochs=" +
                    std::to_string(epochs) + " needs one row per epoch");
  rows_.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = values.data() + r * columns;
    for (int64_t c = 0; c < columns; ++c)
      if (row[c] < 0 || row[c] >= samples)
        throw DataError(where + "row " + std::to_string(r) + ", column " + std::to_string(c) +
                        ": sample index " + std::to_string(row[c]) + " is outside [0, " +
                        std::to_string(samples) + ")");
    rows_[static_cast<size_t>(r)].assign(row, row + columns);
  }
}

SampleOrder load_sample_order(distributed::Communicator& comm, const std::string& path, Index samples,
                              int64_t epochs) {
  const std::vector<char> bytes = distributed::bytes_from_rank0(comm, [&] {
    try {
      return read_order_file(path);
    } catch (const Error& e) {
      throw Error(e.code(), std::string("sampler.order: ") + e.what());
    }
  });
  int64_t shape[2];
  std::memcpy(shape, bytes.data(), sizeof shape);
  std::vector<int64_t> values((bytes.size() - sizeof shape) / sizeof(int64_t));
  // An empty array (shape [0, N]) has no data: memcpy must not see its null pointer (found by
  // fuzz_order, UBSan); the validation below refuses it for having no rows.
  if (!values.empty())
    std::memcpy(values.data(), bytes.data() + sizeof shape, values.size() * sizeof(int64_t));
  return distributed::collectively([&] { return SampleOrder(values, shape[0], shape[1], path, samples, epochs); });
}

}  // namespace mpiddp::data
