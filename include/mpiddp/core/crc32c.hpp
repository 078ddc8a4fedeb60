#pragma once
// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final xor
// 0xFFFFFFFF), the checksum of TFRecord files (record/tensorboard_log.hpp), iSCSI and ext4.
// crc32c("123456789") is 0xE3069283.
#include <cstddef>
#include <cstdint>

namespace mpiddp {

// The CRC of `bytes` bytes at `data`. Pass a previous result as `crc` to continue it over
// more bytes: crc32c(b, n2, crc32c(a, n1)) is the CRC of a followed by b.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

}  // namespace mpiddp
