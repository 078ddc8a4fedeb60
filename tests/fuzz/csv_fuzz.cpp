// Fuzz target: a CSV file, without and with a header line, the target by position and by
// name. Anything but a DataError or a ConfigError is a finding.
#include <cstddef>
#include <cstdint>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/csv.hpp"
#include "temp_input.hpp"

using namespace mpiddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_temp_input(data, size, ".csv");
  data::CsvConfig plain;
  plain.path = path;
  data::CsvConfig named = plain;
  named.header = true;
  named.target_columns = {data::CsvColumn{-1, "y"}, data::CsvColumn{0, ""}};
  data::CsvConfig labels = plain;
  labels.delimiter = ';';
  labels.classes = 4;
  labels.target_columns = {data::CsvColumn{1, ""}};
  for (const auto* config : {&plain, &named, &labels}) {
    try {
      data::load_csv<double>(*config);
    } catch (const Error& e) {
      if (e.code() != kExitData && e.code() != kExitConfig) throw;
    }
  }
  return 0;
}
