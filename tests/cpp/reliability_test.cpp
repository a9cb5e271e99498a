// Reliability defects of the session and the output files (docs/reliability.md).
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "exporters/json_text.h"
#include "exporters/output_file.h"
#include "plugin/session.h"
#include "plugin/session_state.h"
#include "tests/cpp/test_util.h"
#include "tests/support/event_mix.h"

using namespace fqntrace;
using namespace fqntrace::testing;

namespace {
std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

// Drops are counted process-wide; a second session that dropped nothing must say 0, not the
// first one's count (validate would call it incomplete).
TEST(SessionTest, EachSessionReportsOnlyItsOwnDrops) {
  const std::string dir = make_temp_dir();
  const mix::EventMix mix(1, false);
  RawEvent op{};
  for (const auto& e : mix.step()) {
    if (e.raw.kind == EventKind::kOp) {
      op = e.raw;
      break;
    }
  }
  start_tracing(dir + "/first.json");
  ThreadBuffer* buffer = session_state::register_buffer(
      static_cast<uint32_t>(::syscall(SYS_gettid)) + 100000u, "filler");
  ASSERT_NE(buffer, nullptr);
  // Faster than the drain thread empties it (every 20 ms): the ring fills and drops.
  const uint64_t before = buffer->ring.dropped();
  while (buffer->ring.dropped() == before) buffer->ring.push(op);
  session_state::retire_buffer(buffer);
  nlohmann::json first = stop_and_load(dir + "/first.json");
  EXPECT_GT(first.at("fqntrace").at("dropped_events").get<uint64_t>(), 0u);

  start_tracing(dir + "/second.json");
  nlohmann::json second = stop_and_load(dir + "/second.json");
  EXPECT_EQ(second.at("fqntrace").at("dropped_events").get<uint64_t>(), 0u);
}

// A file another live writer holds is neither truncated nor written: the second open fails
// with a message that says why.
TEST(OutputFileTest, NeverTruncatesAFileAnotherWriterHolds) {
  const std::string path = make_temp_dir() + "/held.json";
  OutputFile first;
  std::string error;
  ASSERT_TRUE(first.open(path, &error)) << error;
  first.write("first writer's bytes\n");
  ASSERT_TRUE(first.flush(&error)) << error;
  OutputFile second;
  EXPECT_FALSE(second.open(path, &error));
  EXPECT_NE(error.find("another running process is writing " + path), std::string::npos) << error;
  EXPECT_EQ(read_all(path), "first writer's bytes\n");
  ASSERT_TRUE(first.close(&error)) << error;
  // Once the first writer is done, the path can be written again (from the start).
  OutputFile third;
  ASSERT_TRUE(third.open(path, &error)) << error;
  third.write("x");
  ASSERT_TRUE(third.close(&error)) << error;
  EXPECT_EQ(read_all(path), "x");
}

namespace {
void start_with_env(const std::string& value, const std::map<std::string, std::string>& env) {
  ConfigResult r = parse_config(
      value.c_str(),
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      getpid());
  ASSERT_TRUE(r.config.has_value()) << r.problem;
  std::string error;
  ASSERT_TRUE(start_session(*r.config, &error)) << error;
}

std::string labels_of(const nlohmann::json& trace) {
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("name", "") == "process_labels")
      return e.at("args").at("labels").get<std::string>();
  }
  return "";
}
}  // namespace

// A process started without RANK (an mp.spawn child) learns its rank from init_process_group:
// its files take the names its rank gives (the summary due too), and the header and labels say
// that rank.
TEST(SessionTest, ProcessGroupGivesAProcessWithoutRankItsFiles) {
  const std::string dir = make_temp_dir();
  register_summary_writer();  // as the binding does: the summary is the package's to write
  start_with_env(dir + "/mps.{rank}.json", {{"FQNTRACE_FORMATS", "summary"}});
  set_session_process_group("gloo", 1, 2);
  nlohmann::json trace = stop_and_load(dir + "/mps.1.json");
  EXPECT_EQ(trace.at("distributedInfo"),
            nlohmann::json({{"backend", "gloo"}, {"rank", 1}, {"world_size", 2}}));
  EXPECT_EQ(labels_of(trace), "rank 1");
  std::vector<SummaryDue> due = take_summaries_due();
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].trace, dir + "/mps.1.json");
  EXPECT_EQ(due[0].summary, dir + "/mps.1.summary.json");
  EXPECT_TRUE(take_summaries_due().empty());  // handed over once
  EXPECT_FALSE(std::ifstream(dir + "/mps.0.json").good());
}

// The rank's name is taken by another file: this one keeps its name (never replaces a file),
// and still says its rank.
TEST(SessionTest, ProcessGroupNeverRenamesOntoAnExistingFile) {
  const std::string dir = make_temp_dir();
  std::ofstream(dir + "/run.1.json") << "someone else's";
  start_tracing(dir + "/run.{rank}.json");
  set_session_process_group("gloo", 1, 2);
  nlohmann::json trace = stop_and_load(dir + "/run.0.json");
  EXPECT_EQ(trace.at("distributedInfo").at("rank"), 1);
  EXPECT_EQ(read_all(dir + "/run.1.json"), "someone else's");
}

// A rank given by the environment (torchrun) is never second-guessed: only the backend is added.
TEST(SessionTest, ProcessGroupKeepsARankTheEnvironmentGave) {
  const std::string dir = make_temp_dir();
  start_with_env(dir + "/run.{rank}.json", {{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  set_session_process_group("gloo", 1, 2);
  nlohmann::json trace = stop_and_load(dir + "/run.1.json");
  EXPECT_EQ(trace.at("distributedInfo"),
            nlohmann::json({{"backend", "gloo"}, {"rank", 1}, {"world_size", 2}}));
}

TEST(JsonTextTest, DistributedSlotKeepsItsWidthWhateverItSays) {
  TraceInfo info;
  const size_t unknown = json::distributed_slot(info).size();
  info.backend = "cpu:gloo,cuda:nccl";
  info.rank = 2147483647;
  info.world_size = 2147483647;
  const std::string full = json::distributed_slot(info);
  EXPECT_EQ(full.size(), unknown);
  EXPECT_NE(full.find("\"backend\": \"cpu:gloo,cuda:nccl\", \"rank\": 2147483647"),
            std::string::npos);
  EXPECT_EQ(json::labels_slot(7).size(), json::labels_slot(2147483647).size());
}
