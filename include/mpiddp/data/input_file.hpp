#pragma once
// Read access to a data file, with every system call checked: exact positional reads, a
// read-only memory mapping, and sequential byte sources (a plain slice or a gzip stream)
// that the readers decode from. Every failure is a DataError that names the file.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mpiddp::data {

class InputFile {
 public:
  explicit InputFile(const std::string& path);  // DataError when it cannot be opened
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Reads exactly `bytes` bytes at `offset`; a DataError if the file ends first.
  void read_at(uint64_t offset, void* out, size_t bytes) const;
  // Maps [offset, offset + bytes) read-only. Nothing is copied into private memory: pages
  // are read when first touched and stay in the page cache, shared by every rank on the
  // node. The pointer keeps the mapping alive.
  std::shared_ptr<const unsigned char> map(uint64_t offset, uint64_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Bytes read front to back. Readers decode headers and data from one, so the same reader
// code handles a plain file and a gzip-compressed one.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual const std::string& name() const = 0;
  // Reads exactly `bytes` bytes; a DataError ("truncated") if the data ends first.
  virtual void read(void* out, size_t bytes) = 0;
  // True when no byte is left (used to reject trailing garbage).
  virtual bool at_end() = 0;
  // An upper bound on the bytes still readable: checked against a header's claimed sizes
  // before anything is allocated, so a lying header cannot cause a huge allocation.
  virtual uint64_t max_remaining() const = 0;
};

// [offset, file end) of a plain file.
class FileSlice : public ByteSource {
 public:
  FileSlice(const InputFile& file, uint64_t offset) : file_(file), offset_(offset) {}
  const std::string& name() const override { return file_.path(); }
  void read(void* out, size_t bytes) override;
  bool at_end() override { return offset_ >= file_.size(); }
  uint64_t max_remaining() const override;

 private:
  const InputFile& file_;
  uint64_t offset_;
};

// The decompressed contents of a gzip file.
class GzipSource : public ByteSource {
 public:
  explicit GzipSource(const InputFile& file);  // file only supplies the path and size
  ~GzipSource() override;
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;
  const std::string& name() const override { return path_; }
  void read(void* out, size_t bytes) override;
  bool at_end() override;
  uint64_t max_remaining() const override { return max_total_ - consumed_; }

 private:
  std::string path_;
  void* gz_ = nullptr;  // gzFile; kept opaque so zlib.h stays out of this header
  uint64_t consumed_ = 0;
  uint64_t max_total_ = 0;
};

// True when the file starts with the gzip magic bytes 1f 8b.
bool is_gzip(const InputFile& file);

// A plain or gzip source for the file, chosen by its first bytes rather than its name.
std::unique_ptr<ByteSource> open_byte_source(const InputFile& file);

}  // namespace mpiddp::data
