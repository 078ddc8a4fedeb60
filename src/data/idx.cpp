#include "mpiddp/data/idx.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/loaded_array.hpp"

namespace mpiddp::data {

namespace {

constexpr int kMaxDims = 8;

ElementType idx_type(unsigned char code, const std::string& file) {
  switch (code) {
    case 0x08: return ElementType::kUint8;
    case 0x09: return ElementType::kInt8;
    case 0x0B: return ElementType::kInt16;
    case 0x0C: return ElementType::kInt32;
    case 0x0D: return ElementType::kFloat32;
    case 0x0E: return ElementType::kFloat64;
    default: break;
  }
  throw DataError(file + ": unknown IDX element type code " + std::to_string(code) +
                  "; expected 0x08 (uint8), 0x09, 0x0B, 0x0C, 0x0D or 0x0E");
}

std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

// The file must end with the data: anything after it means the header is wrong.
void expect_end(ByteSource& source) {
  if (!source.at_end())
    throw DataError(source.name() + ": has trailing bytes after the data the IDX header describes");
}

}  // namespace

IdxHeader read_idx_header(ByteSource& source) {
  const std::string& file = source.name();
  unsigned char magic[4];
  source.read(magic, 4);
  if (magic[0] != 0 || magic[1] != 0)
    throw DataError(file + ": not an IDX file (it must start with two zero bytes)");
  IdxHeader h;
  h.encoding = {idx_type(magic[2], file), true};
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims)
    throw DataError(file + ": IDX header declares " + std::to_string(ndims) +
                    " dimensions; expected 1 to " + std::to_string(kMaxDims));
  uint64_t bytes = element_size(h.encoding.type);
  for (int i = 0; i < ndims; ++i) {
    unsigned char b[4];
    source.read(b, 4);
    const uint64_t d = (uint64_t{b[0]} << 24) | (uint64_t{b[1]} << 16) | (uint64_t{b[2]} << 8) | b[3];
    h.dims.push_back(d);
    if (__builtin_mul_overflow(h.elements, d, &h.elements) || __builtin_mul_overflow(bytes, d, &bytes))
      throw DataError(file + ": IDX dimensions " + dims_text(h.dims) + " overflow 64-bit sizes");
  }
  if (bytes > source.max_remaining())
    throw DataError(file + ": truncated or corrupt: the IDX header (" + dims_text(h.dims) + " " +
                    element_name(h.encoding.type) + ") needs " + std::to_string(bytes) +
                    " data bytes, more than the file can hold (" +
                    std::to_string(source.max_remaining()) + ")");
  return h;
}

template <typename T>
Dataset<T> load_idx(const IdxConfig& config) {
  InputFile image_file(config.images), label_file(config.labels);
  auto images = open_byte_source(image_file);
  auto labels = open_byte_source(label_file);
  const IdxHeader ih = read_idx_header(*images), lh = read_idx_header(*labels);
  if (ih.dims[0] == 0 || ih.elements == 0)
    throw DataError(config.images + ": holds no samples (dimensions " + dims_text(ih.dims) + ")");
  if (lh.dims.size() != 1)
    throw DataError(config.labels + ": labels must be one-dimensional [samples], got " +
                    dims_text(lh.dims));
  if (lh.dims[0] != ih.dims[0])
    throw DataError(config.labels + ": has " + std::to_string(lh.dims[0]) + " labels but " +
                    config.images + " has " + std::to_string(ih.dims[0]) + " samples");
  Dataset<T> d;
  d.name = config.images;
  d.samples = static_cast<Index>(ih.dims[0]);
  d.features = static_cast<Index>(ih.elements / ih.dims[0]);
  // Images [N, H, W] are one-channel (1, H, W), as torchvision's tensors; [N, C, H, W] keep theirs.
  if (ih.dims.size() == 3) d.shape = {1, static_cast<Index>(ih.dims[1]), static_cast<Index>(ih.dims[2])};
  if (ih.dims.size() > 3)
    for (size_t i = 1; i < ih.dims.size(); ++i) d.shape.push_back(static_cast<Index>(ih.dims[i]));
  d.classes = config.classes;
  const auto x = load_values<T>(*images, ih.encoding, ih.elements, ih.elements / ih.dims[0], config.scale);
  expect_end(*images);
  const auto y = load_labels(*labels, lh.encoding, lh.elements, config.classes);
  expect_end(*labels);
  d.x = x.data;
  d.labels = y.data;
  d.storage = keep_together({x.storage, y.storage});
  return d;
}

template Dataset<float> load_idx<float>(const IdxConfig&);
template Dataset<double> load_idx<double>(const IdxConfig&);

}  // namespace mpiddp::data
