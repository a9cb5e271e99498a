// FQNTRACE parsing rules, and the behaviour of a traced program given a bad value.
#include "plugin/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "tests/cpp/test_util.h"

using namespace fqntrace;
using namespace fqntrace::testing;

namespace {
ConfigResult parse(const char* value, const char* rank = nullptr, const char* world = nullptr) {
  return parse_config(
      value,
      [&](const char* name) -> const char* {
        if (std::string(name) == "RANK") return rank;
        if (std::string(name) == "WORLD_SIZE") return world;
        return nullptr;
      },
      4242);
}
}  // namespace

TEST(ConfigTest, EmptyOrUnsetMeansOffWithoutComplaint) {
  for (const char* v : {static_cast<const char*>(nullptr), ""}) {
    ConfigResult r = parse(v);
    EXPECT_FALSE(r.config.has_value());
    EXPECT_TRUE(r.problem.empty());
  }
}

TEST(ConfigTest, PlaceholdersAndFormats) {
  ConfigResult r = parse("/tmp/t.{pid}.{rank}.json", "3", "4");
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->path, "/tmp/t.4242.3.json");
  EXPECT_EQ(r.config->format, Format::kChrome);
  EXPECT_EQ(r.config->rank, 3);
  r = parse("/tmp/t.jsonl");
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->format, Format::kJsonLines);
  EXPECT_EQ(r.config->rank, 0);
}

TEST(ConfigTest, BadValuesSayWhatIsWrong) {
  EXPECT_NE(parse("/tmp/{host}.json").problem.find("unknown placeholder {host}"),
            std::string::npos);
  EXPECT_NE(parse("/tmp/{pid.json").problem.find("unmatched '{'"), std::string::npos);
  EXPECT_NE(parse("/tmp/pid}.json").problem.find("unmatched '}'"), std::string::npos);
  EXPECT_NE(parse("/tmp/trace.txt").problem.find("extension '.txt'"), std::string::npos);
  EXPECT_NE(parse("/tmp/trace").problem.find("no extension"), std::string::npos);
}

TEST(ConfigTest, RanksWithoutPlaceholderGetTheirOwnFile) {
  ConfigResult r0 = parse("/tmp/run.json", "0", "2");
  ConfigResult r1 = parse("/tmp/run.json", "1", "2");
  ASSERT_TRUE(r0.config && r1.config);
  EXPECT_EQ(r0.config->path, "/tmp/run.rank0.json");
  EXPECT_EQ(r1.config->path, "/tmp/run.rank1.json");
  EXPECT_FALSE(r0.config->note.empty());  // rank 0 says so once
  EXPECT_TRUE(r1.config->note.empty());
}

TEST(ConfigTest, PathChecks) {
  std::string dir = make_temp_dir();
  std::string fix;
  EXPECT_EQ(check_path_writable(dir + "/ok.json", &fix), "");
  EXPECT_EQ(check_path_writable(dir, &fix), "it is a directory");
  EXPECT_NE(check_path_writable(dir + "/missing/x.json", &fix).find("does not exist"),
            std::string::npos);
  EXPECT_NE(fix.find("mkdir -p"), std::string::npos);
}

// A traced program given a bad FQNTRACE runs to its own exit code with exactly one warning
// line that names FQNTRACE; a good value yields a complete trace.
TEST(EnvironmentTest, BadValuesNeverChangeTheExitCode) {
  std::string dir = make_temp_dir();
  std::string full = dir + "/full.json";
  ASSERT_EQ(symlink("/dev/full", full.c_str()), 0);
  const std::vector<std::string> bad = {
      dir,                         // a directory
      dir + "/nope/trace.json",    // a missing directory
      "/proc/trace.json",          // a directory nobody can create files in
      dir + "/trace.txt",          // an unknown extension
      dir + "/trace.{host}.json",  // a bad placeholder
      full,                        // a disk that is full
      dir + "/a\nb/c.json",        // a newline in the value: still one line
  };
  for (const auto& value : bad) {
    ChildResult r = run_child({FQNTRACE_CHILD, "3"}, {{"FQNTRACE", value}});
    EXPECT_EQ(r.exit_code, 3) << value << "\n" << r.stderr_text;
    std::vector<std::string> lines = lines_of(r.stderr_text);
    ASSERT_EQ(lines.size(), 1u) << value << "\n" << r.stderr_text;
    EXPECT_NE(lines[0].find("FQNTRACE"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("tracing is off"), std::string::npos) << lines[0];
  }
  for (const char* off : {"", "\x01unset"}) {
    ChildResult r = run_child({FQNTRACE_CHILD, "5"}, {{"FQNTRACE", off}});
    EXPECT_EQ(r.exit_code, 5);
    EXPECT_EQ(r.stderr_text, "");
  }
  std::string good = dir + "/good.json";
  ChildResult r = run_child({FQNTRACE_CHILD, "0"}, {{"FQNTRACE", good}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  std::ifstream in(good);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json trace = nlohmann::json::parse(text.str());
  EXPECT_EQ(trace.at("fqntrace").at("complete"), true);
  int child_ops = 0;
  for (const auto& e : slices(trace)) child_ops += e.at("args").at("fqn") == "Child";
  EXPECT_GT(child_ops, 0);
}

// A C++ program (no Python package to compute the CLI's summary) asked for FQNTRACE_FORMATS=summary
// gets one line saying how to make it, and every other output, complete.
TEST(EnvironmentTest, ProgramWithoutPythonIsToldHowToGetTheSummary) {
  const std::string dir = make_temp_dir();
  ChildResult r = run_child({FQNTRACE_CHILD, "0"},
                            {{"FQNTRACE", dir + "/c.json"}, {"FQNTRACE_FORMATS", "jsonl,summary"}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::vector<std::string> lines = lines_of(r.stderr_text);
  ASSERT_EQ(lines.size(), 1u) << r.stderr_text;
  EXPECT_NE(lines[0].find("FQNTRACE_FORMATS=summary: " + dir +
                          "/c.summary.json is written by the "
                          "fqntrace Python package"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("`python -m fqntrace summary --json " + dir + "/c.json > " + dir +
                          "/c.summary.json`"),
            std::string::npos)
      << lines[0];
  std::ifstream chrome(dir + "/c.json");
  std::stringstream text;
  text << chrome.rdbuf();
  EXPECT_EQ(nlohmann::json::parse(text.str()).at("fqntrace").at("complete"), true);
  std::ifstream jsonl(dir + "/c.jsonl");
  std::string line, last;
  while (std::getline(jsonl, line)) last = line;
  nlohmann::json footer = nlohmann::json::parse(last);
  EXPECT_EQ(footer.at("ph"), "footer") << last;
  EXPECT_EQ(footer.at("complete"), true) << last;
  EXPECT_FALSE(std::ifstream(dir + "/c.summary.json").good());
}

// A Python process that loads the library with torch.ops.load_library and FQNTRACE set writes
// a valid trace of its ops.
TEST(EnvironmentTest, PythonLoadLibraryWritesValidTrace) {
  std::string path = make_temp_dir() + "/py.json";
  std::string script =
      "import torch\n"
      "torch.ops.load_library('" FQNTRACE_LIBRARY
      "')\n"
      "x = torch.ones(3, requires_grad=True)\n"
      "(x * 2).sum().backward()\n";
  ChildResult r = run_child({FQNTRACE_PYTHON, "-c", script}, {{"FQNTRACE", path}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json trace = nlohmann::json::parse(text.str());
  std::set<std::string> names;
  for (const auto& e : slices(trace)) names.insert(e.at("name").get<std::string>());
  EXPECT_TRUE(names.count("aten::mul"));
  EXPECT_TRUE(names.count("MulBackward0"));
  EXPECT_EQ(trace.at("distributedInfo").at("rank"), 0);
}

TEST(ConfigTest, ClockChoice) {
  auto with_clock = [](const char* clock) {
    return parse_config(
        "/tmp/t.json",
        [&](const char* name) -> const char* {
          return std::string(name) == "FQNTRACE_CLOCK" ? clock : nullptr;
        },
        1);
  };
  for (const char* fine : {static_cast<const char*>(nullptr), "", "auto"}) {
    ConfigResult r = with_clock(fine);
    ASSERT_TRUE(r.config) << (fine ? fine : "(unset)");
    EXPECT_FALSE(r.config->monotonic_clock);
  }
  ConfigResult mono = with_clock("monotonic");
  ASSERT_TRUE(mono.config);
  EXPECT_TRUE(mono.config->monotonic_clock);
  // An unknown clock keeps the default clock, with one warning (docs/trace-format.md).
  ConfigResult bad = with_clock("rdtsc");
  ASSERT_TRUE(bad.config);
  EXPECT_FALSE(bad.config->monotonic_clock);
  ASSERT_EQ(bad.config->warnings.size(), 1u);
  EXPECT_NE(bad.config->warnings[0].find("FQNTRACE_CLOCK=rdtsc"), std::string::npos);
  EXPECT_NE(bad.config->warnings[0].find("monotonic"), std::string::npos);
}

namespace {
ConfigResult parse_with(const char* value, std::map<std::string, std::string> vars,
                        long pid = 4242) {
  return parse_config(
      value,
      [&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      pid);
}
}  // namespace

// FQNTRACE_FLOPS and FQNTRACE_SHAPES take the usual switch words; anything else warns once.
TEST(ConfigTest, SwitchesAcceptTheUsualWords) {
  for (const char* on : {"1", "true", "TRUE", "yes", "On"}) {
    ConfigResult r = parse_with("/tmp/t.json", {{"FQNTRACE_FLOPS", on}, {"FQNTRACE_SHAPES", on}});
    ASSERT_TRUE(r.config) << on;
    EXPECT_TRUE(r.config->flops) << on;
    EXPECT_TRUE(r.config->shapes) << on;
    EXPECT_TRUE(r.config->warnings.empty()) << on;
  }
  for (const char* off : {"0", "false", "no", "OFF", ""}) {
    ConfigResult r = parse_with("/tmp/t.json", {{"FQNTRACE_FLOPS", off}, {"FQNTRACE_SHAPES", off}});
    ASSERT_TRUE(r.config) << off;
    EXPECT_FALSE(r.config->flops) << off;
    EXPECT_FALSE(r.config->shapes) << off;
    EXPECT_TRUE(r.config->warnings.empty()) << off;
  }
  ConfigResult r =
      parse_with("/tmp/t.json", {{"FQNTRACE_FLOPS", "y\nes"}, {"FQNTRACE_SHAPES", "2"}});
  ASSERT_TRUE(r.config);
  EXPECT_FALSE(r.config->flops);
  EXPECT_FALSE(r.config->shapes);
  ASSERT_EQ(r.config->warnings.size(), 2u);
  EXPECT_NE(r.config->warnings[0].find("FQNTRACE_FLOPS=y\\nes"), std::string::npos)
      << r.config->warnings[0];
  EXPECT_NE(r.config->warnings[1].find("FQNTRACE_SHAPES=2"), std::string::npos);
}

// Module spans are on unless FQNTRACE_MODULE_SPANS says off; a bad value keeps them on, warned.
TEST(ConfigTest, ModuleSpansAreOnUnlessTurnedOff) {
  ConfigResult r = parse_with("/tmp/t.json", {});
  ASSERT_TRUE(r.config);
  EXPECT_TRUE(r.config->module_spans);
  r = parse_with("/tmp/t.json", {{"FQNTRACE_MODULE_SPANS", "off"}});
  ASSERT_TRUE(r.config);
  EXPECT_FALSE(r.config->module_spans);
  EXPECT_TRUE(r.config->warnings.empty());
  r = parse_with("/tmp/t.json", {{"FQNTRACE_MODULE_SPANS", "maybe"}});
  ASSERT_TRUE(r.config);
  EXPECT_TRUE(r.config->module_spans);
  ASSERT_EQ(r.config->warnings.size(), 1u);
  EXPECT_NE(r.config->warnings[0].find("FQNTRACE_MODULE_SPANS=maybe"), std::string::npos);
}

// CPU readings are off unless FQNTRACE_CPU turns them on (they cost a system call each); a bad
// value keeps them off, warned.
TEST(ConfigTest, CpuTimeIsOffUnlessTurnedOn) {
  ConfigResult r = parse_with("/tmp/t.json", {});
  ASSERT_TRUE(r.config);
  EXPECT_FALSE(r.config->cpu_time);
  r = parse_with("/tmp/t.json", {{"FQNTRACE_CPU", "1"}});
  ASSERT_TRUE(r.config);
  EXPECT_TRUE(r.config->cpu_time);
  EXPECT_TRUE(r.config->warnings.empty());
  r = parse_with("/tmp/t.json", {{"FQNTRACE_CPU", "sometimes"}});
  ASSERT_TRUE(r.config);
  EXPECT_FALSE(r.config->cpu_time);
  ASSERT_EQ(r.config->warnings.size(), 1u);
  EXPECT_NE(
      r.config->warnings[0].find("FQNTRACE_CPU=sometimes is not a switch value; it stays off"),
      std::string::npos)
      << r.config->warnings[0];
}

// FQNTRACE_SAMPLE: a probability in (0, 1]; anything else is one warning and the full trace.
TEST(ConfigTest, SampleIsAProbabilityOrTheFullTrace) {
  ConfigResult r = parse_with("/tmp/t.json", {});
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->sample, 1.0);
  r = parse_with("/tmp/t.json", {{"FQNTRACE_SAMPLE", "0.01"}});
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->sample, 0.01);
  EXPECT_TRUE(r.config->warnings.empty());
  r = parse_with("/tmp/t.json", {{"FQNTRACE_SAMPLE", "1"}});
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->sample, 1.0);
  for (const char* bad : {"0", "-0.5", "1.5", "nan", "inf", "0.01x", "often", " "}) {
    r = parse_with("/tmp/t.json", {{"FQNTRACE_SAMPLE", bad}});
    ASSERT_TRUE(r.config) << bad;
    EXPECT_EQ(r.config->sample, 1.0) << bad;
    ASSERT_EQ(r.config->warnings.size(), 1u) << bad;
    EXPECT_NE(r.config->warnings[0].find("is not a probability in (0, 1]; every op is traced"),
              std::string::npos)
        << r.config->warnings[0];
  }
  // The summary is the CLI's summary of the finished trace, sampled or not: still asked for.
  r = parse_with("/tmp/t.json",
                 {{"FQNTRACE_SAMPLE", "0.5"}, {"FQNTRACE_FORMATS", "summary,jsonl"}});
  ASSERT_TRUE(r.config);
  EXPECT_TRUE(r.config->summary);
  EXPECT_EQ(r.config->outputs.size(), 2u);
  EXPECT_TRUE(r.config->warnings.empty());
}

// A rank at or above the world size is a broken launcher environment: the trace could not say
// which process it is (validate would reject it), so tracing is off with one line.
TEST(ConfigTest, RankOutsideTheWorldIsABadValue) {
  ConfigResult r = parse("/tmp/run.json", "5", "2");
  EXPECT_FALSE(r.config);
  EXPECT_NE(r.problem.find("RANK=5 is not below WORLD_SIZE=2"), std::string::npos) << r.problem;
  EXPECT_TRUE(parse("/tmp/run.json", "1", "2").config);
}

// A child that inherited FQNTRACE from a traced parent writes <stem>.pid<PID><ext>; the parent
// itself, a child given another value, and a value with {pid} keep their path.
TEST(ConfigTest, InheritedChildWritesItsOwnFile) {
  ConfigResult parent = parse_with("/tmp/run.json", {{kParentVariable, "4242:/tmp/run.json"}});
  ASSERT_TRUE(parent.config);
  EXPECT_EQ(parent.config->path, "/tmp/run.json");
  EXPECT_FALSE(parent.config->inherited);
  ConfigResult child = parse_with("/tmp/run.json", {{kParentVariable, "100:/tmp/run.json"}});
  ASSERT_TRUE(child.config);
  EXPECT_EQ(child.config->path, "/tmp/run.pid4242.json");
  EXPECT_TRUE(child.config->inherited);
  ConfigResult ranked =
      parse_with("/tmp/run.{rank}.jsonl", {{kParentVariable, "100:/tmp/run.{rank}.jsonl"}});
  ASSERT_TRUE(ranked.config);
  EXPECT_EQ(ranked.config->path, "/tmp/run.0.pid4242.jsonl");
  ConfigResult with_pid =
      parse_with("/tmp/run.{pid}.json", {{kParentVariable, "100:/tmp/run.{pid}.json"}});
  ASSERT_TRUE(with_pid.config);
  EXPECT_EQ(with_pid.config->path, "/tmp/run.4242.json");
  ConfigResult extra = parse_with(
      "/tmp/run.json", {{kParentVariable, "100:/tmp/run.json"}, {"FQNTRACE_FORMATS", "summary"}});
  ASSERT_TRUE(extra.config);
  EXPECT_TRUE(extra.config->summary);  // <stem>.summary.json, written by the Python package
  EXPECT_EQ(extra.config->outputs.size(), 1u);
  EXPECT_EQ(extra.config->stem, "/tmp/run.pid4242");
  // A child given its own FQNTRACE (not inherited) writes where it was told.
  ConfigResult told = parse_with("/tmp/other.json", {{kParentVariable, "100:/tmp/run.json"}});
  ASSERT_TRUE(told.config);
  EXPECT_EQ(told.config->path, "/tmp/other.json");
  EXPECT_FALSE(told.config->inherited);
}
