#pragma once
// Numeric CSV files: one sample per line, the chosen target columns as targets and every
// other column as a feature. Blank lines are skipped; every data line must have the same
// number of fields, each a finite number. A DataError names the file and the line.
#include <string>
#include <vector>

#include "mpiddp/data/dataset.hpp"

namespace mpiddp::data {

// A column by 0-based index (negative counts from the end: -1 is the last) or, when the
// file has a header, by name.
struct CsvColumn {
  Index index = -1;
  std::string name;  // non-empty: look the column up by name in the header
};

struct CsvConfig {
  std::string path;
  bool header = false;  // the first line names the columns
  char delimiter = ',';
  std::vector<CsvColumn> target_columns{CsvColumn{}};  // default: the last column
  Index classes = 0;  // > 0: one target column of integer class labels in [0, classes)
};

template <typename T>
Dataset<T> load_csv(const CsvConfig& config);

}  // namespace mpiddp::data
