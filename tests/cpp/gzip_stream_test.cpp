// Our gzip writer (exporters/gzip_stream.h) against an independent decoder (libdeflate's): a .gz
// trace decompresses to exactly the bytes the same events make in a plain file — with the event
// writer's announced repeats (across 1 MB buffers, sync flushes, cache restarts, distances beyond
// deflate's window) and with unannounced text that the matcher compresses.
#include <gtest/gtest.h>
#include <libdeflate.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "buffer/intern.h"
#include "exporters/crc32.h"
#include "exporters/event_lines.h"
#include "exporters/output_file.h"
#include "tests/cpp/test_util.h"
#include "tests/support/event_mix.h"

using namespace fqntrace;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string gunzip(const std::string& gz, size_t expected_size) {
  std::string out(expected_size + 1, '\0');
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  size_t got = 0;
  libdeflate_result rc =
      libdeflate_gzip_decompress(d, gz.data(), gz.size(), &out[0], out.size(), &got);
  libdeflate_free_decompressor(d);
  EXPECT_EQ(rc, LIBDEFLATE_SUCCESS);
  out.resize(rc == LIBDEFLATE_SUCCESS ? got : 0);
  return out;
}

// The same events into a plain and a .gz file, each through its own EventLines, with flushes at
// random moments (as the drain's periodic flush).
class PlainAndGzip {
 public:
  PlainAndGzip() : dir_(fqntrace::testing::make_temp_dir()) {
    std::string error;
    EXPECT_TRUE(plain_.open(dir_ + "/t.json", &error)) << error;
    EXPECT_TRUE(gz_.open(dir_ + "/t.json.gz", &error)) << error;
    plain_lines_ = std::make_unique<json::EventLines>(1234, plain_.gzip());
    gz_lines_ = std::make_unique<json::EventLines>(1234, gz_.gzip());
    text("{\"schemaVersion\": 1, \"traceEvents\": [\n");
  }
  void add(const EventRecord& e) {
    plain_lines_->append(plain_.pending(), e, ",\n", &plain_first_);
    plain_.wrote();
    gz_lines_->append(gz_.pending(), e, ",\n", &gz_first_);
    gz_.wrote();
    if (rng_() % 5000 == 0) {
      std::string error;
      EXPECT_TRUE(gz_.flush(&error)) << error;
    }
  }
  void text(const std::string& s) {  // unannounced text (header, tail)
    plain_.write(s);
    gz_.write(s);
  }
  // Closes both; returns (plain bytes, decompressed gzip bytes).
  std::pair<std::string, std::string> finish() {
    text("\n]}\n");
    std::string error;
    EXPECT_TRUE(plain_.close(&error)) << error;
    EXPECT_TRUE(gz_.close(&error)) << error;
    std::string plain = read_file(dir_ + "/t.json");
    std::string gz = read_file(dir_ + "/t.json.gz");
    compressed_size = gz.size();
    return {plain, gunzip(gz, plain.size())};
  }
  size_t compressed_size = 0;

 private:
  std::string dir_;
  OutputFile plain_, gz_;
  std::unique_ptr<json::EventLines> plain_lines_, gz_lines_;
  bool plain_first_ = true, gz_first_ = true;
  std::mt19937 rng_{7};
};

const std::string kNone;

EventRecord record(const RawEvent& raw, uint32_t tid, uint64_t n) {
  const InternTable& names = InternTable::instance();
  const Range& r = raw.range;
  bool flow = raw.kind == EventKind::kNode && r.node.flow_src_ns != 0;
  return EventRecord{
      raw,
      tid,
      names.str(r.name_id),
      names.str(r.fqn_id),
      raw.kind == EventKind::kModule ? names.str(r.module.type_id) : kNone,
      raw.kind == EventKind::kCollective ? names.str(r.collective.kind_name_id) : kNone,
      r.start_ns,
      r.end_ns - r.start_ns,
      flow ? n + 1 : 0,
      flow ? r.node.flow_src_ns : 0,
      nullptr,
      nullptr};
}

}  // namespace

// Many MB of the benchmark's event mix (collectives included): several 1 MB buffers and flushes.
TEST(GzipStreamTest, MixDecompressesToThePlainText) {
  mix::EventMix m;
  PlainAndGzip files;
  uint64_t n = 0;
  for (uint64_t k = 0; k < 30; ++k) {
    for (const auto& me : m.step())
      files.add(record(m.at_step(me.raw, k), mix::EventMix::tid(me.thread), n++));
  }
  auto [plain, unzipped] = files.finish();
  ASSERT_GT(plain.size(), 3u << 20);
  EXPECT_TRUE(unzipped == plain);
  EXPECT_LT(files.compressed_size * 5, plain.size());  // and it compresses
}

// Names that never repeat: the line cache starts over (marks forgotten) and heads are written
// more than 32 KiB apart; hostile bytes in names.
TEST(GzipStreamTest, NamesThatNeverRepeatAndHostileBytes) {
  PlainAndGzip files;
  for (uint64_t i = 0; i < 80000; ++i) {
    RawEvent e{};
    e.kind = i % 7 == 0 ? EventKind::kUserScope : EventKind::kOp;
    e.depth = static_cast<uint8_t>(i % 4);
    e.range.start_ns = 1000 * i;
    e.range.end_ns = 1000 * i + 17 * (i % 100);
    e.range.seq = i % 3 == 0 ? -1 : static_cast<int64_t>(i);
    std::string name = i % 2 ? "step " + std::to_string(i) : (i % 3 ? "aten::mm" : "we\"ird\n\xff");
    e.range.name_id = InternTable::instance().intern(name);
    e.range.fqn_id =
        InternTable::instance().intern(i % 5 ? "Global" : "Model.layers." + std::to_string(i % 11));
    files.add(record(e, 40 + i % 3, i));
    if (i % 10007 == 0) files.text(std::string(5000, 'x') + "unannounced " + std::to_string(i));
  }
  auto [plain, unzipped] = files.finish();
  EXPECT_TRUE(unzipped == plain);
}

// A training step longer than deflate's window: each (op, module) combination comes back only
// a step later, out of reach, while its head (the op on that thread) and its arguments (the
// module) were written a few events back by other combinations, after other times.
TEST(GzipStreamTest, HeadsAndArgumentsSharedAcrossCombinations) {
  PlainAndGzip files;
  const char* ops[] = {"aten::linear", "aten::t", "aten::addmm", "aten::relu", "aten::empty"};
  uint64_t n = 0, ts = 5000;
  for (int step = 0; step < 6; ++step) {
    for (int module = 0; module < 120; ++module) {
      std::string fqn =
          "Model.layers." + std::to_string(module / 3) + ".mlp." + std::to_string(module % 3);
      for (const char* op : ops) {
        RawEvent e{};
        e.kind = EventKind::kOp;
        e.depth = static_cast<uint8_t>(n % 3);
        ts += 1 + (n * 7919) % 300000;  // times that share more or fewer leading digits
        e.range.start_ns = ts;
        e.range.end_ns = ts + 1000 + n % 977;
        e.range.seq = n % 4 == 0 ? -1 : static_cast<int64_t>(n);
        e.range.name_id = InternTable::instance().intern(op);
        e.range.fqn_id = InternTable::instance().intern(fqn);
        files.add(record(e, 40 + (module + step) % 2, n++));
      }
    }
  }
  auto [plain, unzipped] = files.finish();
  ASSERT_GT(plain.size() / 6, 64u << 10);  // a step is more than twice the window
  EXPECT_TRUE(unzipped == plain);
}

// Only unannounced text, of every byte value, in odd-sized pieces with flushes between.
TEST(GzipStreamTest, UnannouncedTextOfEveryByte) {
  std::string dir = fqntrace::testing::make_temp_dir();
  OutputFile gz;
  std::string error;
  ASSERT_TRUE(gz.open(dir + "/b.bin.gz", &error)) << error;
  std::mt19937 rng(11);
  std::string all;
  for (int piece = 0; piece < 400; ++piece) {
    std::string s;
    size_t len = rng() % 9000;
    for (size_t i = 0; i < len; ++i) {
      s += piece % 3 == 0 ? static_cast<char>(rng()) : "abcab\"0123,\n"[rng() % 12];
    }
    if (piece % 4 == 0 && !all.empty()) s += all.substr(all.size() / 2, 300);  // a long repeat
    gz.write(s);
    all += s;
    if (piece % 7 == 0) {
      ASSERT_TRUE(gz.flush(&error)) << error;
    }
  }
  ASSERT_TRUE(gz.close(&error)) << error;
  EXPECT_TRUE(gunzip(read_file(dir + "/b.bin.gz"), all.size()) == all);
}

// The CRC-32 a build without libdeflate uses (exporters/crc32.h) equals libdeflate's, continued
// from any value, at every alignment and every length around its 8-byte steps.
TEST(Crc32Test, PortableLoopEqualsLibdeflate) {
  std::mt19937 random(7);
  std::string bytes(4096 + 16, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  EXPECT_EQ(crc32_portable(0, "123456789", 9), 0xCBF43926u);  // the standard check value
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t size : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096}) {
      const uint32_t start = static_cast<uint32_t>(random());
      const char* data = bytes.data() + offset;
      EXPECT_EQ(crc32_portable(start, data, size), libdeflate_crc32(start, data, size))
          << "offset " << offset << ", size " << size;
    }
  }
}
