#include "mpiddp/train/sample_order.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/io/npy_int64.hpp"
#include "mpiddp/train/rank0_io.hpp"

namespace mpiddp::train {

SampleOrder::SampleOrder(const std::vector<char>& npy_bytes, const std::string& path,
                         Index samples, int64_t epochs) {
  io::Int64Array array;
  try {
    array = io::parse_npy_int64(npy_bytes, path);
  } catch (const DataError& e) {
    throw DataError(std::string("sampler.order: ") + e.what());
  }
  const std::string where = "sampler.order '" + path + "': ";
  if (array.shape.size() != 2)
    throw DataError(where + "expected a 2-D array [epochs, samples], got " +
                    std::to_string(array.shape.size()) + " dimensions");
  const int64_t rows = array.shape[0], columns = array.shape[1];
  if (columns != samples)
    throw DataError(where + "rows have " + std::to_string(columns) +
                    " entries but data.train has " + std::to_string(samples) + " samples");
  if (rows < epochs)
    throw DataError(where + "has " + std::to_string(rows) + " rows but epochs=" +
                    std::to_string(epochs) + " needs one row per epoch");
  rows_.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = array.values.data() + r * columns;
    for (int64_t c = 0; c < columns; ++c)
      if (row[c] < 0 || row[c] >= samples)
        throw DataError(where + "row " + std::to_string(r) + ", column " + std::to_string(c) +
                        ": sample index " + std::to_string(row[c]) + " is outside [0, " +
                        std::to_string(samples) + ")");
    rows_[static_cast<size_t>(r)].assign(row, row + columns);
  }
}

SampleOrder load_sample_order(dist::Communicator& comm, const std::string& path, Index samples,
                              int64_t epochs) {
  const std::vector<char> bytes =
      bytes_from_rank0(comm, [&] { return io::read_whole_file(path, kExitData, "sampler.order"); });
  return collectively([&] { return SampleOrder(bytes, path, samples, epochs); });
}

}  // namespace mpiddp::train
