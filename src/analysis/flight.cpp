#include "mpiddp/analysis/flight.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::analysis {

namespace {

using io::Json;

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw Error(kExitConfig, "flight file '" + path + "': " + what);
}

int64_t integer_field(const Json& object, const char* key, const std::string& path,
                      const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer())
    bad_file(path, where + "has no integer field '" + key + "'");
  return it->get<int64_t>();
}

std::string text_field(const Json& object, const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) bad_file(path, std::string("has no text field '") + key + "'");
  return it->get<std::string>();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

const FlightRecord* record_at(const FlightFile& f, int64_t seq) {
  const auto it = std::lower_bound(f.records.begin(), f.records.end(), seq,
                                   [](const FlightRecord& r, int64_t s) { return r.seq < s; });
  return it != f.records.end() && it->seq == seq ? &*it : nullptr;
}

int64_t last_seq(const FlightFile& f) { return f.records.empty() ? 0 : f.records.back().seq; }

// Where one rank (or a group: plural) stands: "is in barrier #4813 at step 801", "is outside
// MPI at step 801, after allreduce_sum_float #4812"; "waits in" for ranks ahead of others.
std::string position(const FlightFile& f, bool ahead, bool plural) {
  const std::string step = " at step " + std::to_string(f.step);
  if (f.records.empty()) return std::string(plural ? "have" : "has") + " made no collective yet" + step;
  const FlightRecord& last = f.records.back();
  const std::string which = last.kind + " #" + std::to_string(last.seq);
  const std::string is = plural ? "are " : "is ";
  if (last.open()) return (ahead ? std::string(plural ? "wait in " : "waits in ") : is + "in ") + which + step;
  return is + "outside MPI" + step + ", after " + which;
}

// Ranks grouped by what they say, in rank order of each group's first rank.
template <typename Key>
std::vector<std::pair<Key, std::vector<int>>> group_ranks(const std::vector<const FlightFile*>& files,
                                                          auto key_of) {
  std::vector<std::pair<Key, std::vector<int>>> groups;
  for (const FlightFile* f : files) {
    const Key key = key_of(*f);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) groups.push_back({key, {f->rank}});
    else it->second.push_back(f->rank);
  }
  return groups;
}

const FlightFile& file_of(const std::vector<const FlightFile*>& files, int rank) {
  return **std::find_if(files.begin(), files.end(), [&](const FlightFile* f) { return f->rank == rank; });
}

// Sentences "rank 1 is in ...; ranks 0, 2 wait in ..." for the given ranks, grouped.
std::string positions(const std::vector<const FlightFile*>& files, const std::set<int>& ahead) {
  const auto groups = group_ranks<std::string>(
      files, [&](const FlightFile& f) { return position(f, ahead.count(f.rank) > 0, false); });
  std::string text;
  for (const auto& [where, ranks] : groups) {
    const FlightFile& first = file_of(files, ranks[0]);
    text += (text.empty() ? "" : "; ") + rank_list(ranks) + " " +
            position(first, ahead.count(first.rank) > 0, ranks.size() > 1);
  }
  return text;
}

}  // namespace

const char* verdict_name(FlightVerdict v) {
  switch (v) {
    case FlightVerdict::kAgree: return "agree";
    case FlightVerdict::kAllWaiting: return "all_waiting";
    case FlightVerdict::kMissing: return "missing";
    case FlightVerdict::kMismatch: return "mismatch";
    case FlightVerdict::kProgress: return "progress";
  }
  return "unknown";
}

FlightFile parse_flight_file(const std::string& text, const std::string& path) {
  const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) bad_file(path, "not valid JSON");
  if (!doc.contains("format") || doc["format"] != "mpiddp-flight-1")
    bad_file(path, "not a flight recorder file (no \"format\": \"mpiddp-flight-1\")");
  FlightFile f;
  f.path = path;
  const int64_t size = integer_field(doc, "size", path, "");
  const int64_t rank = integer_field(doc, "rank", path, "");
  if (size < 1 || size > (1 << 24) || rank < 0 || rank >= size)
    bad_file(path, "rank " + std::to_string(rank) + " of size " + std::to_string(size) +
                       " is not a rank of a job");
  f.size = static_cast<int>(size);
  f.rank = static_cast<int>(rank);
  f.step = integer_field(doc, "step", path, "");
  f.written_us = integer_field(doc, "written_us", path, "");
  f.reason = text_field(doc, "reason", path);
  const auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_array()) bad_file(path, "has no array 'entries'");
  for (size_t i = 0; i < entries->size(); ++i) {
    const Json& e = (*entries)[i];
    const std::string where = "entry " + std::to_string(i) + " ";
    if (!e.is_object()) bad_file(path, where + "is not an object");
    FlightRecord r;
    r.seq = integer_field(e, "seq", path, where);
    r.bytes = integer_field(e, "bytes", path, where);
    r.step = integer_field(e, "step", path, where);
    r.start_us = integer_field(e, "start_us", path, where);
    const auto kind = e.find("kind");
    if (kind == e.end() || !kind->is_string()) bad_file(path, where + "has no text field 'kind'");
    r.kind = kind->get<std::string>();
    const auto end = e.find("end_us");
    if (end == e.end() || !(end->is_null() || end->is_number_integer()))
      bad_file(path, where + "has no field 'end_us' (an integer, or null while inside)");
    if (!end->is_null()) r.end_us = end->get<int64_t>();
    if (!f.records.empty() && r.seq != f.records.back().seq + 1)
      bad_file(path, where + "has collective #" + std::to_string(r.seq) + " after #" +
                         std::to_string(f.records.back().seq) + ": the numbers must be consecutive");
    if (r.open() && i + 1 != entries->size())
      bad_file(path, where + "is open (end_us null) but is not the last entry");
    f.records.push_back(std::move(r));
  }
  return f;
}

FlightFile read_flight_file(const std::string& path) {
  const std::vector<char> bytes = io::read_whole_file(path, kExitConfig, "flight file");
  return parse_flight_file(std::string(bytes.begin(), bytes.end()), path);
}

FlightAnalysis analyse_flight(const std::vector<FlightFile>& files) {
  if (files.empty()) throw Error(kExitConfig, "no flight files given");
  FlightAnalysis a;
  a.world_size = files.front().size;
  std::vector<const FlightFile*> present;
  std::set<int> ranks_seen;
  for (const FlightFile& f : files) {
    if (f.size != a.world_size)
      throw Error(kExitConfig, "flight files of different jobs: '" + files.front().path +
                                   "' is of a job of " + std::to_string(a.world_size) + " ranks, '" +
                                   f.path + "' of " + std::to_string(f.size));
    if (!ranks_seen.insert(f.rank).second)
      throw Error(kExitConfig, "two flight files of rank " + std::to_string(f.rank) + " (the second '" +
                                   f.path + "')");
    present.push_back(&f);
  }
  std::sort(present.begin(), present.end(),
            [](const FlightFile* x, const FlightFile* y) { return x->rank < y->rank; });
  for (int r = 0; r < a.world_size; ++r)
    if (!ranks_seen.count(r)) a.missing.push_back(r);

  int64_t lowest_last = INT64_MAX, highest_last = 0, common_first = 0;
  for (const FlightFile* f : present) {
    lowest_last = std::min(lowest_last, last_seq(*f));
    highest_last = std::max(highest_last, last_seq(*f));
    if (!f->records.empty()) common_first = std::max(common_first, f->records.front().seq);
  }

  // The first collective recorded by several ranks with a different kind or payload.
  int64_t mismatch_seq = 0;
  for (int64_t s = std::max<int64_t>(common_first, 1); s <= highest_last && mismatch_seq == 0; ++s) {
    std::set<std::pair<std::string, int64_t>> seen;
    for (const FlightFile* f : present)
      if (const FlightRecord* r = record_at(*f, s)) seen.insert({r->kind, r->bytes});
    if (seen.size() > 1) mismatch_seq = s;
  }
  // The first collective some ranks reached and others did not; with every rank at the same
  // last one, the ranks still inside it against those that have left it.
  int64_t progress_seq = 0;
  std::set<int> ahead;
  if (highest_last > lowest_last) {
    progress_seq = lowest_last + 1;
    for (const FlightFile* f : present)
      if (last_seq(*f) > lowest_last) ahead.insert(f->rank);
  } else if (lowest_last > 0) {
    bool any_open = false, any_closed = false;
    for (const FlightFile* f : present) (f->records.back().open() ? any_open : any_closed) = true;
    if (any_open && any_closed) {
      progress_seq = lowest_last;
      for (const FlightFile* f : present)
        if (!f->records.back().open()) ahead.insert(f->rank);
    }
  }

  const std::string where_all = positions(present, ahead);
  if (!a.missing.empty()) {
    a.verdict = FlightVerdict::kMissing;
    a.ranks = a.missing;
    a.seq = highest_last;
    // The ranks that wrote are the ones left waiting, presumably for the missing ones.
    std::set<int> waiting;
    for (const FlightFile* f : present) waiting.insert(f->rank);
    a.summary = rank_list(a.missing) + (a.missing.size() == 1 ? " has" : " have") +
                " no flight file (killed, or it could not write one); " + positions(present, waiting);
    return a;
  }
  if (mismatch_seq > 0 && (progress_seq == 0 || mismatch_seq <= progress_seq)) {
    a.verdict = FlightVerdict::kMismatch;
    a.seq = mismatch_seq;
    const auto groups = group_ranks<std::pair<std::string, int64_t>>(present, [&](const FlightFile& f) {
      const FlightRecord* r = record_at(f, mismatch_seq);
      return r ? std::make_pair(r->kind, r->bytes) : std::make_pair(std::string(), int64_t{-1});
    });
    // The odd ones out: every group but the largest (ties: the one holding the lowest rank).
    size_t reference = 0;
    for (size_t g = 1; g < groups.size(); ++g)
      if (groups[g].second.size() > groups[reference].second.size()) reference = g;
    std::string text;
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& [key, ranks] = groups[g];
      if (key.second < 0) continue;  // ranks whose ring no longer holds it
      if (g != reference) a.ranks.insert(a.ranks.end(), ranks.begin(), ranks.end());
      const FlightRecord& rec = *record_at(file_of(present, ranks[0]), mismatch_seq);
      const std::string verb = rec.open() ? (ranks.size() > 1 ? " are in " : " is in ") : " completed ";
      text += (text.empty() ? "" : "; ") + rank_list(ranks) + verb +
              key.first + " of " + std::to_string(key.second) + " bytes at step " +
              std::to_string(rec.step);
    }
    std::sort(a.ranks.begin(), a.ranks.end());
    a.summary = "mismatched collective #" + std::to_string(mismatch_seq) + ": " + text +
                " (the ranks' code paths diverged)";
    // A mismatch that completed: where the ranks are now, too.
    if (mismatch_seq < highest_last) a.summary += "; now " + where_all;
    return a;
  }
  if (progress_seq > 0) {
    a.verdict = FlightVerdict::kProgress;
    a.seq = progress_seq;
    for (const FlightFile* f : present)
      if (!ahead.count(f->rank)) a.ranks.push_back(f->rank);
    a.summary = where_all;
    return a;
  }
  a.seq = lowest_last;
  a.ranks.clear();
  const bool waiting = lowest_last > 0 && present.front()->records.back().open();
  a.verdict = waiting ? FlightVerdict::kAllWaiting : FlightVerdict::kAgree;
  a.summary = waiting ? "every rank " + position(*present.front(), false, false) +
                            ": every rank arrived, the collective itself (the MPI library or "
                            "the network) is stuck"
                      : "the rings agree: " + where_all;
  return a;
}

std::string flight_table(const std::vector<FlightFile>& files, int world_size, int64_t mark_seq) {
  std::vector<const FlightFile*> by_rank(static_cast<size_t>(world_size), nullptr);
  int64_t first = INT64_MAX, last = 0;
  for (const FlightFile& f : files) {
    if (f.rank < world_size) by_rank[static_cast<size_t>(f.rank)] = &f;
    if (!f.records.empty()) {
      first = std::min(first, f.records.front().seq);
      last = std::max(last, f.records.back().seq);
    }
  }
  constexpr int kWidth = 52;
  std::string text;
  char cell[128];
  std::snprintf(cell, sizeof cell, "   %8s", "#");
  text += cell;
  for (int r = 0; r < world_size; ++r) {
    std::snprintf(cell, sizeof cell, "  %-*s", kWidth,
                  ("rank " + std::to_string(r) + (by_rank[r] ? "" : " (no file)")).c_str());
    text += cell;
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  text += "\n";
  for (int64_t s = first; s <= last; ++s) {
    std::snprintf(cell, sizeof cell, "%s %8lld", s == mark_seq ? ">>" : "  ", static_cast<long long>(s));
    text += cell;
    for (int r = 0; r < world_size; ++r) {
      const FlightRecord* rec = by_rank[r] ? record_at(*by_rank[r], s) : nullptr;
      std::string what;
      if (rec) {
        const int64_t end = rec->end_us.value_or(by_rank[r]->written_us);
        char line[128];
        std::snprintf(line, sizeof line, "%s %lldB step %lld %s%.3f ms", rec->kind.c_str(),
                      static_cast<long long>(rec->bytes), static_cast<long long>(rec->step),
                      rec->open() ? "IN IT " : "", static_cast<double>(end - rec->start_us) / 1000.0);
        what = line;
      } else if (by_rank[r] && s > last_seq(*by_rank[r])) {
        what = "-";  // not reached
      } else {
        what = by_rank[r] ? "(older than its ring)" : "";
      }
      std::snprintf(cell, sizeof cell, "  %-*s", kWidth, what.c_str());
      text += cell;
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    text += "\n";
  }
  return text;
}

}  // namespace mpiddp::analysis
