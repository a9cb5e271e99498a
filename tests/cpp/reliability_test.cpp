// Reliability defects of the session and the output files (docs/reliability.md).
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "exporters/output_file.h"
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
  ThreadBuffer* buffer =
      session_state::register_buffer(static_cast<uint32_t>(::syscall(SYS_gettid)) + 100000u, "filler");
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
