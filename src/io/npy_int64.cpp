#include "mpiddp/io/npy_int64.hpp"

#include <bit>
#include <cstring>
#include <limits>

#include "mpiddp/core/error.hpp"

namespace mpiddp::io {

namespace {

// The value text of 'key' in the header dict, up to the next top-level comma or brace:
// "'<i8'", "False", "(3, 4)". Empty when the key is absent.
std::string dict_value(const std::string& header, const std::string& key) {
  const auto at = header.find("'" + key + "'");
  if (at == std::string::npos) return "";
  auto colon = header.find(':', at);
  if (colon == std::string::npos) return "";
  size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  const size_t start = i;
  int depth = 0;
  for (; i < header.size(); ++i) {
    const char c = header[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string value = header.substr(start, i - start);
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

}  // namespace

Int64Array parse_npy_int64(const std::vector<char>& bytes, const std::string& name) {
  auto fail = [&](const std::string& problem) -> void {
    throw DataError(".npy file '" + name + "': " + problem);
  };
  static_assert(std::endian::native == std::endian::little, "the int64 data is read in place");
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    fail("not a NumPy .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail("truncated header");
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    header_start = 12;
  } else {
    fail("unsupported format version " + std::to_string(major) + " (expected 1, 2 or 3)");
  }
  if (header_len > bytes.size() - header_start) fail("truncated header");
  const std::string header(bytes.data() + header_start, header_len);
  const std::string descr = dict_value(header, "descr");
  if (descr != "'<i8'")
    fail("dtype " + (descr.empty() ? std::string("(missing)") : descr) +
         " is not supported here; expected little-endian int64 ('<i8', numpy.int64)");
  if (dict_value(header, "fortran_order") != "False")
    fail("the array is in Fortran order; save it with numpy.ascontiguousarray first");
  const std::string shape_text = dict_value(header, "shape");
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')')
    fail("malformed shape in header: " + header);

  Int64Array array;
  uint64_t count = 1;
  size_t i = 1;
  while (i + 1 < shape_text.size()) {
    while (i + 1 < shape_text.size() && (shape_text[i] == ' ' || shape_text[i] == ',')) ++i;
    if (i + 1 >= shape_text.size()) break;
    uint64_t extent = 0;
    bool digits = false;
    while (i + 1 < shape_text.size() && shape_text[i] >= '0' && shape_text[i] <= '9') {
      extent = extent * 10 + static_cast<uint64_t>(shape_text[i] - '0');
      if (extent > (uint64_t{1} << 40)) fail("shape " + shape_text + " is impossibly large");
      digits = true;
      ++i;
    }
    if (!digits) fail("malformed shape " + shape_text);
    count *= extent;
    if (count > (uint64_t{1} << 40)) fail("shape " + shape_text + " is impossibly large");
    array.shape.push_back(static_cast<int64_t>(extent));
  }
  const size_t data_start = header_start + header_len;
  const uint64_t available = bytes.size() - data_start;
  if (available != count * 8)
    fail((available < count * 8 ? "truncated: " : "trailing bytes: ") + std::string("shape ") +
         shape_text + " needs " + std::to_string(count * 8) + " data bytes, the file has " +
         std::to_string(available));
  array.values.resize(count);
  if (count) std::memcpy(array.values.data(), bytes.data() + data_start, count * 8);
  return array;
}

}  // namespace mpiddp::io
