#pragma once
// A registry of named entries (layer types, loss types): the built-in ones, then those a
// program adds before it parses a config. Entries never move once added (a deque), so a
// pointer from find() stays valid; the lock lets a program register from any thread.
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpiddp {

template <typename Entry>  // Entry has a std::string `name`
class NamedRegistry {
 public:
  // what: "layer type", for the message of a name registered twice.
  NamedRegistry(std::vector<Entry> builtins, std::string what) : what_(std::move(what)) {
    for (Entry& entry : builtins) entries_.push_back(std::move(entry));
  }

  // A second entry of the same name is a programming error (std::logic_error).
  void add(Entry entry) {
    std::lock_guard lock(mutex_);
    for (const Entry& known : entries_)
      if (known.name == entry.name)
        throw std::logic_error(what_ + " '" + entry.name + "' is registered twice");
    entries_.push_back(std::move(entry));
  }
  // Null when no entry has that name.
  const Entry* find(const std::string& name) {
    std::lock_guard lock(mutex_);
    for (const Entry& known : entries_)
      if (known.name == name) return &known;
    return nullptr;
  }
  // Every name, in registration order (for messages).
  std::vector<std::string> names() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> result;
    for (const Entry& known : entries_) result.push_back(known.name);
    return result;
  }

 private:
  std::mutex mutex_;
  std::deque<Entry> entries_;
  std::string what_;
};

// "a, b or c": names as a message lists them.
inline std::string alternatives_text(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

}  // namespace mpiddp
