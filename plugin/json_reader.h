// A small JSON reader for the capture requests `python -m fqntrace capture` writes
// (docs/on-demand.md): a whole document into a tree. Requests are a few hundred bytes of our own
// making, read about once a second off the hot path, so it aims at being obviously right, not
// fast. Anything malformed (or nested deeper than 32) gives no value.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fqntrace::json_reader {

struct Value {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  // The member `key` of an object, or nullptr (not an object, or no such member).
  const Value* get(const std::string& key) const;
  bool is_number() const { return type == Type::kNumber; }
  bool is_string() const { return type == Type::kString; }
};

std::optional<Value> parse(std::string_view text);

}  // namespace fqntrace::json_reader
