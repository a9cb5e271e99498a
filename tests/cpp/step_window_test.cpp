// FQNTRACE_STEPS syntax (plugin/step_window.h) and how parse_config reports a bad value: one
// warning, tracing of every step, never tracing off. And the gzip paths' outputs.
#include "plugin/step_window.h"

#include <gtest/gtest.h>

#include "plugin/config.h"

using namespace fqntrace;

namespace {
ConfigResult parse_with(const char* path, const char* steps, const char* formats = nullptr) {
  return parse_config(
      path,
      [&](const char* name) -> const char* {
        if (std::string(name) == "FQNTRACE_STEPS") return steps;
        if (std::string(name) == "FQNTRACE_FORMATS") return formats;
        return nullptr;
      },
      4242);
}
}  // namespace

TEST(StepWindowTest, FirstEndRecordsThoseStepsOnly) {
  StepWindow w;
  std::string problem;
  ASSERT_TRUE(parse_step_window("3:5", &w, &problem));
  for (uint64_t s = 0; s < 10; ++s) EXPECT_EQ(w.contains(s), s == 3 || s == 4) << s;
}

TEST(StepWindowTest, PeriodRepeatsTheWindow) {
  StepWindow w;
  std::string problem;
  ASSERT_TRUE(parse_step_window("10:20:100", &w, &problem));
  EXPECT_FALSE(w.contains(9));
  EXPECT_TRUE(w.contains(10));
  EXPECT_TRUE(w.contains(19));
  EXPECT_FALSE(w.contains(20));
  EXPECT_TRUE(w.contains(110));
  EXPECT_TRUE(w.contains(219));
  EXPECT_FALSE(w.contains(250));
}

TEST(StepWindowTest, DefaultRecordsEveryStep) {
  StepWindow w;
  EXPECT_TRUE(w.all());
  EXPECT_TRUE(w.contains(0));
  EXPECT_TRUE(w.contains(123456789));
}

TEST(StepWindowTest, EveryMalformedValueIsRejectedWithAReason) {
  for (const char* bad :
       {"", "abc", "3", "5:3", "3:3", "3:5:4", "1:2:0", "-1:3", ":5", "3:", "1:2:3:4", " 3:5",
        "3:5 ", "3.0:5", "+3:5", "0x3:5", "1:99999999999999999999"}) {
    StepWindow w;
    std::string problem;
    EXPECT_FALSE(parse_step_window(bad, &w, &problem)) << bad;
    EXPECT_FALSE(problem.empty()) << bad;
    EXPECT_TRUE(w.all()) << bad;
  }
}

TEST(StepWindowTest, BadValueWarnsOnceAndKeepsTracingEveryStep) {
  ConfigResult r = parse_with("/tmp/t.json", "10-20");
  ASSERT_TRUE(r.config);  // tracing stays on
  EXPECT_TRUE(r.config->steps.all());
  EXPECT_NE(r.config->warning.find("FQNTRACE_STEPS=10-20"), std::string::npos);
  EXPECT_NE(r.config->warning.find("every step is traced"), std::string::npos);
  EXPECT_EQ(r.config->warning.find('\n'), std::string::npos);  // one line
  ConfigResult good = parse_with("/tmp/t.json", "10:20");
  ASSERT_TRUE(good.config);
  EXPECT_TRUE(good.config->warning.empty());
  EXPECT_EQ(good.config->steps.first, 10u);
  EXPECT_EQ(good.config->steps.end, 20u);
}

TEST(StepWindowTest, GzipPathsKeepTheirFormatAndStem) {
  ConfigResult r = parse_with("/tmp/run.json.gz", nullptr, "jsonl.gz,chrome,summary");
  ASSERT_TRUE(r.config) << r.problem;
  EXPECT_EQ(r.config->format, Format::kChrome);
  ASSERT_EQ(r.config->outputs.size(), 3u);
  EXPECT_EQ(r.config->outputs[0].path, "/tmp/run.json.gz");
  EXPECT_EQ(r.config->outputs[1].path, "/tmp/run.jsonl.gz");
  EXPECT_EQ(r.config->outputs[2].path, "/tmp/run.json");
  EXPECT_EQ(r.config->stem, "/tmp/run");  // the summary's: /tmp/run.summary.json
  EXPECT_TRUE(r.config->summary);
  ConfigResult l = parse_with("/tmp/run.jsonl.gz", nullptr);
  ASSERT_TRUE(l.config);
  EXPECT_EQ(l.config->format, Format::kJsonLines);
  EXPECT_FALSE(parse_with("/tmp/run.gz", nullptr).config);
}
