// P4: exporter throughput on one core (Google Benchmark). Realistic raw events
// (tests/support/event_mix.h) go through the drain thread's own code: each thread's ring
// (buffer/event_ring.h) is drained by a Drainer (drain/drainer.h, what the session's drain thread
// runs), which converts times, resolves names and hands the record to the real exporters
// (make_chrome_trace_exporter() …), which write through OutputFile with write(2) into /dev/null.
//
//   fqntrace_exporter_bench [google benchmark flags]    BM_Export/<format>: events/s, bytes/event
//   fqntrace_exporter_bench --plain FORMAT EVENTS [PATH]  exactly EVENTS events, no framework
//                                                          (for callgrind/perf: a fixed amount of
//                                                          work)
//
// Counters: events_per_s (CPU time of this thread: one core; the driver also reads wall time),
// bytes_per_event (file bytes per raw event, flow objects included; measured once per format by
// writing whole steps to a temporary file), json_objects_per_event.
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/event_mix.h"

namespace fqntrace::bench {
namespace {

using mix::MixCounts;
using mix::MixPipeline;

uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Bytes the format adds per raw event: a file of `steps` steps minus a file of none.
struct Size {
  double bytes_per_event = 0;
  uint64_t bytes = 0;
};
Size measure_size(const std::string& format, uint64_t steps) {
  char dir[] = "/tmp/fqntrace-exporter-bench-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return {};
  auto total = [&](uint64_t n, const std::string& stem, uint64_t* events) {
    MixPipeline p(format, std::string(dir) + "/" + stem + ".json");
    for (uint64_t k = 0; k < n; ++k) {
      p.push_step(k);
      *events += p.drain();
    }
    p.finish();
    uint64_t bytes = 0;
    for (const auto& path : p.paths()) {
      bytes += file_size(path);
      ::unlink(path.c_str());
    }
    return bytes;
  };
  uint64_t events = 0, none = 0;
  uint64_t empty = total(0, "empty", &none);
  uint64_t full = total(steps, "full", &events);
  ::rmdir(dir);
  Size s;
  s.bytes = full;
  s.bytes_per_event =
      events != 0 ? static_cast<double>(full - empty) / static_cast<double>(events) : 0;
  return s;
}

void BM_Export(benchmark::State& state, std::string format) {
  MixPipeline p(format, "/dev/null");
  uint64_t k = 0;
  uint64_t events = 0;
  for (auto _ : state) {
    state.PauseTiming();
    // Eight steps (~8,000 events) per drain, as one 20 ms drain period of a busy program.
    for (int i = 0; i < 8; ++i) p.push_step(k++);
    state.ResumeTiming();
    events += p.drain();
    if (k % 256 == 0) p.flush();  // the drain thread flushes every 500 ms (the 1 MB buffer sooner)
  }
  p.finish();
  state.SetItemsProcessed(static_cast<int64_t>(events));
  const MixCounts& c = p.mix().counts();
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events_per_iteration"] =
      static_cast<double>(events) / static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["events_per_step"] = static_cast<double>(c.total());
  state.counters["json_objects_per_event"] =
      static_cast<double>(c.total() + 2 * c.flows) / static_cast<double>(c.total());
  if (format != "all") {
    Size s = measure_size(format, 16);
    state.counters["bytes_per_event"] = s.bytes_per_event;
    state.counters["file_bytes_16_steps"] = static_cast<double>(s.bytes);
  }
}

int plain(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s --plain FORMAT EVENTS [PATH]\n", argv[0]);
    return 2;
  }
  std::string format = argv[2];
  uint64_t want = std::strtoull(argv[3], nullptr, 10);
  std::string path = argc > 4 ? argv[4] : "/dev/null";
  MixPipeline p(format, path);
  uint64_t events = 0;
  for (uint64_t k = 0; events < want; ++k) {
    p.push_step(k);
    events += p.drain();
  }
  p.finish();
  std::printf("{\"format\": \"%s\", \"events\": %llu, \"events_per_step\": %llu}\n", format.c_str(),
              static_cast<unsigned long long>(events),
              static_cast<unsigned long long>(p.mix().counts().total()));
  return 0;
}

}  // namespace
}  // namespace fqntrace::bench

int main(int argc, char** argv) {
  using namespace fqntrace::bench;
  if (argc > 1 && std::strcmp(argv[1], "--plain") == 0) return plain(argc, argv);
  for (const char* format : {"chrome", "jsonl", "all", "chrome_gz", "jsonl_gz"}) {
    benchmark::RegisterBenchmark((std::string("BM_Export/") + format).c_str(), BM_Export,
                                 std::string(format))
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
