#include "plugin/json_reader.h"

#include <cctype>
#include <cstdlib>

namespace fqntrace::json_reader {
namespace {

constexpr int kMaxDepth = 32;

class Reader {
 public:
  explicit Reader(std::string_view text) : s_(text) {}

  bool document(Value* out) {
    if (!value(out, 0)) return false;
    skip_space();
    return i_ == s_.size();
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  bool value(Value* out, int depth) {
    if (depth > kMaxDepth) return false;
    skip_space();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->type = Value::Type::kString;
      return string(&out->string);
    }
    if (literal("null")) {
      out->type = Value::Type::kNull;
      return true;
    }
    if (literal("true")) {
      out->type = Value::Type::kBool;
      out->boolean = true;
      return true;
    }
    if (literal("false")) {
      out->type = Value::Type::kBool;
      return true;
    }
    return number(out);
  }

  bool number(Value* out) {
    size_t start = i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                              s_[i_] == '+' || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
    }
    if (i_ == start) return false;
    std::string text(s_.substr(start, i_ - start));
    char* end = nullptr;
    out->number = std::strtod(text.c_str(), &end);
    out->type = Value::Type::kNumber;
    return end == text.c_str() + text.size();
  }

  static void append_utf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool string(std::string* out) {
    ++i_;  // the opening quote
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          uint32_t cp = 0;
          for (int k = 0; k < 4; ++k) {
            char h = s_[i_++];
            cp <<= 4;
            if (h >= '0' && h <= '9')
              cp |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f')
              cp |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              cp |= static_cast<uint32_t>(h - 'A' + 10);
            else
              return false;
          }
          append_utf8(out, cp);  // a surrogate half stays as it is: names here are ASCII
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  bool array(Value* out, int depth) {
    out->type = Value::Type::kArray;
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return true;
    }
    for (;;) {
      Value item;
      if (!value(&item, depth + 1)) return false;
      out->array.push_back(std::move(item));
      skip_space();
      if (i_ >= s_.size()) return false;
      char c = s_[i_++];
      if (c == ']') return true;
      if (c != ',') return false;
    }
  }

  bool object(Value* out, int depth) {
    out->type = Value::Type::kObject;
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return true;
    }
    for (;;) {
      skip_space();
      std::string key;
      if (i_ >= s_.size() || s_[i_] != '"' || !string(&key)) return false;
      skip_space();
      if (i_ >= s_.size() || s_[i_++] != ':') return false;
      Value item;
      if (!value(&item, depth + 1)) return false;
      out->object[key] = std::move(item);
      skip_space();
      if (i_ >= s_.size()) return false;
      char c = s_[i_++];
      if (c == '}') return true;
      if (c != ',') return false;
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

const Value* Value::get(const std::string& key) const {
  if (type != Type::kObject) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

std::optional<Value> parse(std::string_view text) {
  Value v;
  if (!Reader(text).document(&v)) return std::nullopt;
  return v;
}

}  // namespace fqntrace::json_reader
