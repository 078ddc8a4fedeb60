// png_stats FILE.png: decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's
// screenshots are) with zlib and prints "WIDTH HEIGHT INK_FRACTION COLORS": the fraction of
// pixels that differ from the top-left (background) pixel, and the number of distinct
// colours (capped at 1000). Exit 1 with a message when the file is not such a PNG.
// The render test uses it to tell a drawn plot from a blank page.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "png_stats: %s\n", why.c_str());
  std::exit(1);
}

uint32_t be32(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

int paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) die("usage: png_stats FILE.png");
  std::ifstream in(argv[1], std::ios::binary);
  const std::vector<unsigned char> file{std::istreambuf_iterator<char>(in), {}};
  static const unsigned char kSignature[8] = {137, 'P', 'N', 'G', 13, 10, 26, 10};
  if (file.size() < 33 || !std::equal(kSignature, kSignature + 8, file.begin()))
    die(std::string(argv[1]) + ": not a PNG file");
  uint32_t width = 0, height = 0, channels = 0;
  std::vector<unsigned char> compressed;
  for (size_t at = 8; at + 12 <= file.size();) {
    const uint32_t length = be32(&file[at]);
    const std::string type(file.begin() + at + 4, file.begin() + at + 8);
    if (at + 12 + length > file.size()) die("truncated chunk " + type);
    const unsigned char* data = &file[at + 8];
    if (type == "IHDR") {
      width = be32(data);
      height = be32(data + 4);
      if (data[8] != 8 || (data[9] != 2 && data[9] != 6) || data[12] != 0)
        die("only 8-bit non-interlaced RGB/RGBA is supported");
      channels = data[9] == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      compressed.insert(compressed.end(), data, data + length);
    }
    at += 12 + length;
  }
  if (width == 0 || height == 0) die("no IHDR chunk");
  const size_t stride = size_t{width} * channels;
  std::vector<unsigned char> raw((stride + 1) * height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, compressed.data(), compressed.size()) != Z_OK ||
      raw_size != raw.size())
    die("corrupt image data");

  // Undo the per-row filters (PNG spec, section 9) in place.
  std::vector<unsigned char> pixels(stride * height);
  for (uint32_t y = 0; y < height; ++y) {
    const unsigned char filter = raw[y * (stride + 1)];
    const unsigned char* src = &raw[y * (stride + 1) + 1];
    unsigned char* row = &pixels[y * stride];
    const unsigned char* up = y > 0 ? row - stride : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= channels ? row[i - channels] : 0, b = up ? up[i] : 0;
      const int c = up && i >= channels ? up[i - channels] : 0;
      int predictor = 0;
      switch (filter) {
        case 0: predictor = 0; break;
        case 1: predictor = a; break;
        case 2: predictor = b; break;
        case 3: predictor = (a + b) / 2; break;
        case 4: predictor = paeth(a, b, c); break;
        default: die("bad filter type");
      }
      row[i] = static_cast<unsigned char>(src[i] + predictor);
    }
  }

  size_t ink = 0;
  std::set<uint32_t> colors;
  const unsigned char* background = pixels.data();
  for (size_t p = 0; p < size_t{width} * height; ++p) {
    const unsigned char* px = &pixels[p * channels];
    if (px[0] != background[0] || px[1] != background[1] || px[2] != background[2]) ++ink;
    if (colors.size() < 1000) colors.insert(uint32_t{px[0]} << 16 | uint32_t{px[1]} << 8 | px[2]);
  }
  std::printf("%u %u %.6f %zu\n", width, height, static_cast<double>(ink) / (static_cast<double>(width) * height),
              colors.size());
  return 0;
}
