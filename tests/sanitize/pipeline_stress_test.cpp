// The concurrent core under the sanitizers (scripts/sanitizers.sh): producer threads that come
// and go (register a buffer, push, retire) while a drain thread runs the session's drain code
// (BufferRegistry::for_each_and_reap → Drainer → the two real exporters). Every event is either
// written or counted as dropped, and the files parse back. Needs no libtorch code, so every line
// that runs is instrumented (TSan reports races only in instrumented code).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "buffer/buffer_registry.h"
#include "buffer/ticks.h"
#include "drain/drainer.h"
#include "tests/support/event_mix.h"

namespace fqntrace {
namespace {

std::string temp_dir() {
  char pattern[] = "/tmp/fqntrace-sanitize-XXXXXX";
  const char* dir = ::mkdtemp(pattern);
  return dir == nullptr ? std::string("/tmp") : std::string(dir);
}

nlohmann::json load(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// 4 threads at a time, 300 short-lived threads in all, against one drain thread.
TEST(PipelineStressTest, ShortLivedProducersAgainstTheDrain) {
  constexpr int kWaves = 75;
  constexpr int kThreadsPerWave = 4;
  constexpr int kStepsPerThread = 1;  // ~100 events: the threads' coming and going is the point
  choose_tick_source(/*force_monotonic=*/true);
  const std::string dir = temp_dir();
  const mix::EventMix mix(/*layers=*/1, /*collectives=*/false);

  TraceInfo info;
  info.pid = ::getpid();
  info.process_name = "stress";
  info.version = "test";
  info.mono_origin_ns = monotonic_ns();
  std::vector<std::unique_ptr<Exporter>> exporters;
  exporters.push_back(make_chrome_trace_exporter());
  exporters.push_back(make_json_lines_exporter());
  const std::vector<std::string> paths = {dir + "/t.json", dir + "/t.jsonl"};
  for (size_t i = 0; i < exporters.size(); ++i) {
    info.path = paths[i];
    std::string error;
    ASSERT_TRUE(exporters[i]->open(info, &error)) << error;
  }
  // Without the backward module spans the drain builds, the tail counts exactly what was drained
  // (exporter_mix_test counts the spans).
  Drainer drainer(std::move(exporters), info.mono_origin_ns, /*shapes=*/false,
                  /*module_spans=*/false);
  drainer.start_clock();

  BufferRegistry registry(/*capacity_log2=*/10);  // small rings: some drops happen
  std::atomic<bool> producing{true};
  std::atomic<uint64_t> pushed{0};
  uint64_t drained = 0;
  std::thread drain_thread([&] {
    for (;;) {
      bool last = !producing.load(std::memory_order_acquire);
      drainer.begin_batch();
      registry.for_each_and_reap([&](ThreadBuffer& b) { drained += drainer.drain(b); });
      std::string error;
      EXPECT_TRUE(drainer.flush(&error)) << error;
      if (last) return;
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // the session waits 20 ms
    }
  });
  for (int wave = 0; wave < kWaves; ++wave) {
    std::vector<std::thread> producers;
    for (int t = 0; t < kThreadsPerWave; ++t) {
      producers.emplace_back([&, wave, t] {
        ThreadBuffer* buffer =
            registry.add(static_cast<uint32_t>(1000 + wave * kThreadsPerWave + t), "producer");
        uint64_t mine = 0;
        for (uint64_t k = 0; k < kStepsPerThread; ++k) {
          for (const mix::MixEvent& e : mix.step()) {
            buffer->ring.push(mix.at_step(e.raw, k));
            ++mine;
          }
        }
        pushed.fetch_add(mine, std::memory_order_relaxed);
        registry.retire(buffer);
      });
    }
    for (auto& p : producers) p.join();
  }
  producing.store(false, std::memory_order_release);
  drain_thread.join();

  const uint64_t dropped = registry.dropped_total();
  EXPECT_EQ(drained + dropped, pushed.load());
  std::vector<std::string> errors = drainer.finish(dropped);
  EXPECT_TRUE(errors.empty());
  nlohmann::json chrome = load(paths[0]);
  EXPECT_EQ(chrome.at("fqntrace").at("events").get<uint64_t>(), drained);
  EXPECT_EQ(chrome.at("fqntrace").at("dropped_events").get<uint64_t>(), dropped);
  std::ifstream lines(paths[1]);
  std::string line;
  uint64_t jsonl_lines = 0;
  while (std::getline(lines, line)) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;  // every line is JSON
    ++jsonl_lines;
  }
  EXPECT_GT(jsonl_lines, drained);  // header, thread names, events, footer
}

}  // namespace
}  // namespace fqntrace
