// Fuzz target: the index of a checkpoint in parts (checkpoint/checkpoint_parts.hpp), as
// --resume and mpiddp export read it, over the genuine parts of a checkpoint written in two
// parts: the tensors' slices (their parts, ranges and checksums), the part files it names, the
// metadata. Anything but an Error with the checkpoint's exit code (another exception, a crash,
// an ASan or UBSan finding, a huge allocation) is a finding.
//
// The first byte chooses what the rest is:
//   even: the whole index (any bytes);
//   odd:  a JSON merge patch (RFC 7396) applied to the genuine index, so that the fuzzer
//         changes a slice, a part's name or a metadata field of an otherwise valid index.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint_parts.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "checkpoint_run.hpp"

using namespace mpiddp;
using io::Json;

namespace {

// The run every index is resumed into (checkpoint_run.hpp), its checkpoint cut in two parts at
// parameter 5 (in 0.bias).
struct Run : fuzz::CheckpointRun {
  std::string checkpoint = checkpoint::parts_checkpoint_path(dir, 2);
  Json genuine;

  Run() : CheckpointRun("parts") {
    std::filesystem::create_directories(checkpoint);
    const std::string id = checkpoint::parts_write_id(identity, checkpoint, 2, 0);
    std::vector<Json> parts;
    for (int p = 0; p < 2; ++p)
      parts.push_back(checkpoint::write_part({checkpoint, id, p, 2, p == 0 ? 0 : 5, p == 0 ? 5 : 9, p == 0}, model,
                                             *optimizer, 0));
    checkpoint::write_parts_index(checkpoint, id, {1, 2, 2}, identity, model, *optimizer, parts, nullptr);
    const auto bytes = io::read_whole_file(checkpoint::parts_index_path(checkpoint), kExitCheckpoint);
    genuine = Json::parse(bytes.begin(), bytes.end());
  }
};

// Resumes from the index as --resume does, then exports the checkpoint as mpiddp export does.
void read_index(Run& run, const std::string& index) {
  fuzz::refused_or_read([&] {
    checkpoint::PartsCheckpoint parts(run.checkpoint, std::vector<char>(index.begin(), index.end()));
    checkpoint::restore_parts(parts, run.identity, run.model, *run.optimizer, 0);
  });
  std::ofstream(checkpoint::parts_index_path(run.checkpoint), std::ios::binary | std::ios::trunc) << index;
  fuzz::refused_or_read([&] { checkpoint::export_checkpoint_weights(run.checkpoint, run.dir + "/export.safetensors"); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Run run;
  if (size == 0) return 0;
  std::string index(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 1) {
    const Json patch = Json::parse(index, nullptr, /*allow_exceptions=*/false);
    if (patch.is_discarded()) return 0;
    Json patched = run.genuine;
    patched.merge_patch(patch);
    try {
      index = patched.dump(-1, ' ', false, Json::error_handler_t::strict);
    } catch (const Json::type_error&) {
      return 0;  // text that is not UTF-8: no index a writer would make
    }
  }
  read_index(run, index);
  return 0;
}
