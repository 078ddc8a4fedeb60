#include "mpiddp/data/input_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "mpiddp/core/error.hpp"

namespace mpiddp::data {

namespace {

// Deflate cannot expand data by more than about 1032:1, so a gzip file of n bytes holds at
// most this many; the slack covers headers of tiny files.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kGzipSlack = 1 << 16;

std::string system_error(const std::string& path, const char* what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

std::string truncated(const std::string& path, uint64_t wanted, uint64_t offset) {
  return path + ": truncated: needed " + std::to_string(wanted) + " more bytes at offset " +
         std::to_string(offset) + " but the data ends first";
}

}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw DataError(system_error(path, "cannot open"));
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const std::string message = system_error(path, "cannot stat");
    ::close(fd_);
    throw DataError(message);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    throw DataError(path + ": not a regular file");
  }
  size_ = static_cast<uint64_t>(info.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void* out, size_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) throw DataError(truncated(path_, bytes, offset));
  auto* p = static_cast<unsigned char*>(out);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, p, std::min<size_t>(bytes, 1 << 30), static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw DataError(system_error(path_, "read failed"));
    }
    if (got == 0) throw DataError(truncated(path_, bytes, offset));  // shrank while reading
    p += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
}

std::shared_ptr<const unsigned char> InputFile::map(uint64_t offset, uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) throw DataError(truncated(path_, bytes, offset));
  // mmap needs a page-aligned file offset; the whole file up to the end of the range is
  // mapped, which costs address space only.
  const uint64_t length = offset + bytes;
  if (length == 0) return std::shared_ptr<const unsigned char>(nullptr, [](const unsigned char*) {});
  void* base = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (base == MAP_FAILED) throw DataError(system_error(path_, "cannot memory-map"));
  // Samples are read in shuffled order: tell the kernel not to read ahead.
  ::madvise(base, length, MADV_RANDOM);
  const auto* start = static_cast<const unsigned char*>(base);
  return std::shared_ptr<const unsigned char>(
      start + offset, [base, length](const unsigned char*) { ::munmap(base, length); });
}

void FileSlice::read(void* out, size_t bytes) {
  file_.read_at(offset_, out, bytes);
  offset_ += bytes;
}

uint64_t FileSlice::max_remaining() const {
  return offset_ >= file_.size() ? 0 : file_.size() - offset_;
}

GzipSource::GzipSource(const InputFile& file) : path_(file.path()) {
  gz_ = gzopen(path_.c_str(), "rb");
  if (!gz_) throw DataError(system_error(path_, "cannot open for gzip decompression"));
  gzbuffer(static_cast<gzFile>(gz_), 1 << 17);
  max_total_ = file.size() * kMaxDeflateRatio + kGzipSlack;
}

GzipSource::~GzipSource() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

void GzipSource::read(void* out, size_t bytes) {
  auto* gz = static_cast<gzFile>(gz_);
  auto* p = static_cast<unsigned char*>(out);
  while (bytes > 0) {
    const auto chunk = static_cast<unsigned>(std::min<size_t>(bytes, INT_MAX / 2));
    const int got = gzread(gz, p, chunk);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(gz, &code);
      throw DataError(path_ + ": corrupt gzip data after " + std::to_string(consumed_) +
                      " decompressed bytes: " + (message ? message : "unknown zlib error"));
    }
    if (got == 0) {
      int code = 0;
      const char* message = gzerror(gz, &code);
      // A gzip stream cut short reports Z_BUF_ERROR ("unexpected end of file").
      const std::string detail = code != Z_OK && message ? std::string(" (") + message + ")" : "";
      throw DataError(truncated(path_, bytes, consumed_) + " of the decompressed data" + detail);
    }
    p += got;
    bytes -= static_cast<size_t>(got);
    consumed_ += static_cast<uint64_t>(got);
  }
}

bool GzipSource::at_end() {
  unsigned char probe = 0;
  auto* gz = static_cast<gzFile>(gz_);
  const int got = gzread(gz, &probe, 1);
  if (got < 0) {
    int code = 0;
    throw DataError(path_ + ": corrupt gzip data: " + gzerror(gz, &code));
  }
  if (got == 0) {
    // zlib reports a stream cut short (even one missing only its CRC trailer) as
    // Z_BUF_ERROR with a zero-length read, not as a failed read.
    int code = 0;
    gzerror(gz, &code);
    if (code == Z_BUF_ERROR)
      throw DataError(path_ + ": truncated gzip file: the compressed stream ends without its "
                              "end marker and checksum");
    return true;
  }
  gzungetc(probe, gz);
  return false;
}

bool is_gzip(const InputFile& file) {
  unsigned char magic[2] = {0, 0};
  if (file.size() < 2) return false;
  file.read_at(0, magic, 2);
  return magic[0] == 0x1f && magic[1] == 0x8b;
}

std::unique_ptr<ByteSource> open_byte_source(const InputFile& file) {
  if (is_gzip(file)) return std::make_unique<GzipSource>(file);
  return std::make_unique<FileSlice>(file, 0);
}

}  // namespace mpiddp::data
