// JSON text: escaping, number formats, hostile module names surviving a round trip.
#include "exporters/json_text.h"

#include <gtest/gtest.h>

#include <set>

#include "fqntrace/module_scope.h"
#include "tests/cpp/test_util.h"

using nlohmann::json;
using namespace fqntrace;
using namespace fqntrace::testing;

TEST(JsonTextTest, EscapesQuotesBackslashesAndControls) {
  std::string out;
  const std::string raw =
      "a\"b\\c\nd\te\x01"
      "f\x7f";
  json::append_string(out, raw);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\te\\u0001f\\u007f\"");
  EXPECT_EQ(nlohmann::json::parse(out).get<std::string>(), raw);
}

TEST(JsonTextTest, InvalidUtf8BecomesReplacementCharacter) {
  std::string out;
  json::append_string(out, "ok \xff\xfe end \xc3\xa9");  // two bad bytes, then a valid "é"
  EXPECT_EQ(nlohmann::json::parse(out).get<std::string>(),
            "ok \xEF\xBF\xBD\xEF\xBF\xBD end \xc3\xa9");
}

TEST(JsonTextTest, MicrosecondsKeepNanosecondDigits) {
  std::string out;
  json::append_us(out, 1234567);
  out += ' ';
  json::append_us(out, 5);
  out += ' ';
  json::append_us(out, 0);
  EXPECT_EQ(out, "1234.567 0.005 0.000");
}

// Module names with quotes, backslashes, newlines, control characters and non-ASCII text are
// written as valid JSON and read back unchanged.
TEST(JsonTextTest, HostileModuleNamesRoundTrip) {
  const std::vector<std::string> names = {"Model.\"quoted\"", "Model.back\\slash",
                                          "Model.new\nline",  std::string("Model.ctl\x01\x1f", 11),
                                          "Модель.слой_0",    "Model.😀.ok"};
  std::string path = make_temp_dir() + "/hostile.json";
  start_tracing(path);
  for (const auto& name : names) {
    fqntrace::ModuleScope scope(name, "Weird\"Type");
    torch::ones({2}).add(1);
  }
  nlohmann::json trace = stop_and_load(path);
  // Events are written when they end, so sort module spans by start time.
  std::vector<nlohmann::json> spans, adds;
  for (const auto& e : slices(trace)) {
    if (e.at("args").contains("module_type")) spans.push_back(e);
    if (e.at("name") == "aten::add") adds.push_back(e);
  }
  std::sort(spans.begin(), spans.end(),
            [](const auto& a, const auto& b) { return a.at("ts") < b.at("ts"); });
  std::vector<std::string> seen;
  for (const auto& span : spans) {
    seen.push_back(span.at("args").at("fqn"));
    EXPECT_EQ(span.at("args").at("module_type"), "Weird\"Type");
    EXPECT_EQ(span.at("name"), "nn.Module: " + seen.back());
  }
  std::set<std::string> add_fqns;
  for (const auto& add : adds) add_fqns.insert(add.at("args").at("fqn").get<std::string>());
  EXPECT_EQ(add_fqns, std::set<std::string>(names.begin(), names.end()));
  for (const auto& add : adds) {
    bool inside = false;
    for (const auto& span : spans) {
      if (span.at("ts") <= add.at("ts") && span.at("args").at("fqn") == add.at("args").at("fqn"))
        inside = true;
    }
    EXPECT_TRUE(inside) << add.dump();
  }
  EXPECT_EQ(seen, names);
}
