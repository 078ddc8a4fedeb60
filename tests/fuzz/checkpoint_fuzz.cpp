// Fuzz target: the checkpoint reader beyond raw safetensors, that is the mpiddp_checkpoint
// metadata (position, optimizer state, model, dtype, config, batch geometry, checksum) and
// the named parameter and optimizer tensors, as --resume and mpiddp export read them.
// Anything but an Error with the checkpoint's exit code (another exception, a crash, an ASan
// or UBSan finding, a huge allocation) is a finding.
//
// The first byte chooses what the rest is:
//   even: a whole checkpoint file (any bytes; safetensors parsing itself is fuzz_safetensors')
//   odd:  the metadata's JSON text alone, written with the tensors of a genuine checkpoint of
//         the model below; with bit 1 set, a JSON object gets the genuine data_checksum, so
//         the fuzzer gets past the integrity check to the checks behind it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/io/safetensors.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/update_rule.hpp"
#include "mpiddp/checkpoint/checkpoint.hpp"
#include "checkpoint_run.hpp"
#include "temp_input.hpp"

using namespace mpiddp;
using io::Json;

namespace {

constexpr const char* kMetadataKey = "mpiddp_checkpoint";

// The run every input is resumed into (checkpoint_run.hpp). make_seeds.sh writes metadata
// that matches it.
struct Run : fuzz::CheckpointRun {
  std::vector<io::TensorToWrite> tensors;  // the genuine checkpoint's, pointing into `genuine`
  std::string checksum;                    // its data_checksum
  io::SafetensorsFile genuine;

  Run() : CheckpointRun("checkpoint"), genuine(make_genuine()) {
    for (const auto& t : genuine.tensors())
      tensors.push_back({t.name, t.dtype, t.shape, genuine.data() + t.begin});
    checksum = Json::parse(genuine.metadata().at(kMetadataKey)).at("data_checksum");
  }

  io::SafetensorsFile make_genuine() {
    const config::CheckpointConfig settings{dir};
    const std::string path = checkpoint::write_checkpoint(settings, {1, 2, 2}, identity, model, *optimizer);
    return io::read_safetensors(path, kExitCheckpoint);
  }
};

// Resumes from `file` as --resume does, then exports it as mpiddp export does.
void read_checkpoint(Run& run, const std::string& path) {
  fuzz::refused_or_read([&] {
    const io::SafetensorsFile file = io::read_safetensors(path, kExitCheckpoint);
    checkpoint::restore_checkpoint(file, run.identity, run.model, *run.optimizer);
  });
  fuzz::refused_or_read([&] { checkpoint::export_checkpoint_weights(path, run.dir + "/export.safetensors"); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Run run;
  if (size == 0) return 0;
  std::vector<char> bytes;
  if (data[0] % 2 == 0) {
    bytes.assign(data + 1, data + size);
  } else {
    std::string metadata(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] & 2) {
      Json state = Json::parse(metadata, nullptr, /*allow_exceptions=*/false);
      if (state.is_object()) {
        state["data_checksum"] = run.checksum;
        metadata = state.dump(-1, ' ', false, Json::error_handler_t::replace);
      }
    }
    try {
      bytes = io::encode_safetensors(run.tensors, {{kMetadataKey, metadata}});
    } catch (const Json::type_error&) {
      return 0;  // the writer refuses metadata that is not UTF-8: no file for the reader
    }
  }
  const std::string path =
      fuzz::write_temp_input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                             ".safetensors");
  read_checkpoint(run, path);
  return 0;
}
