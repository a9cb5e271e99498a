// Small helpers over simdjson On-Demand shared by the analysis engines (summary_engine.cpp,
// merge_engine.cpp): a token's text without the whitespace after it, an object key's text, a
// number simdjson misreads, and a literal's check.
#pragma once

#include <simdjson.h>

#include <string_view>

namespace fqntrace::analysis {

// A raw token (simdjson's raw_json_token() runs up to the next structural character) without
// the whitespace after it.
inline std::string_view trimmed(std::string_view raw) {
  while (!raw.empty() &&
         (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\n' || raw.back() == '\r'))
    raw.remove_suffix(1);
  return raw;
}

// A key's text: as written when it has no escape (no copy), else unescaped; with unescape
// false, a key with an escape gives false.
inline bool key_text(simdjson::ondemand::field& field, std::string_view& out,
                     bool unescape = true) {
  const char* start = field.key().raw();
  const char* p = start;
  while (*p != '"' && *p != '\\') ++p;
  if (*p == '"') {
    out = std::string_view(start, static_cast<size_t>(p - start));
    return true;
  }
  return unescape && !field.unescaped_key().get(out);
}

// More than 19 digits before any exponent in a number's raw token: simdjson (3.x) reads such a
// number wrong (get_number() gives 0 for 1.00000000000000000001, get_double() 1.15e-09 for
// 0.1000000000000000000000000001), so the Python path reads it. The core writes at most 17.
inline bool long_number(std::string_view raw) {
  size_t digits = 0;
  for (char c : raw) {
    if (c == 'e' || c == 'E' || c == ',' || c == '}' || c == ']') break;
    digits += c >= '0' && c <= '9';
  }
  return digits > 19;
}

// A `true`, `false` or `null` literal is what it claims to be (stage 1 only marked its start).
inline bool valid_literal(simdjson::ondemand::value v, simdjson::ondemand::json_type type) {
  if (type == simdjson::ondemand::json_type::boolean) {
    bool b;
    return !v.get_bool().get(b);
  }
  bool is_null = false;
  return type == simdjson::ondemand::json_type::null && !v.is_null().get(is_null) && is_null;
}

}  // namespace fqntrace::analysis
