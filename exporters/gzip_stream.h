// gzip on the fly for the streaming outputs (FQNTRACE=run.json.gz / run.jsonl.gz): one standard
// gzip member (RFC 1952 around RFC 1951 deflate), with a deflate encoder of our own that does not
// search for repeats where the writer already knows them.
//
// Why not zlib: deflate's cost is finding matches, and the event writer (exporters/event_lines.h)
// knows them — an event's line is mostly text it wrote before (its cached head and arguments, the
// keys between the numbers). It says so with repeat(): "these bytes are the text I wrote at
// *mark". Those become back-references at no search cost; the rest (numbers, separators) are
// literals; only long unannounced runs (header, memory and collective events) go through a small
// greedy matcher. Codes: one Huffman table fitted once to what trace text looks like (digits
// short), sent at the start of every block. The CRC-32: exporters/crc32.h.
//
// Crash safety: each flush ends the block and adds an empty stored block (a sync flush point, as
// zlib's Z_SYNC_FLUSH): everything handed in so far can be decompressed from the bytes written,
// so a process killed between flushes leaves a file whose text is whole up to the last flush
// (`python -m fqntrace repair` closes it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace fqntrace {

class GzipStream {
 public:
  enum class Flush { kNone, kSync, kFinish };
  GzipStream();

  // false (with *error) if the stream could not be set up.
  bool init(std::string* error);

  // The `len` bytes at offset `at` of the text that the next compress() call will be given are
  // the same bytes as those written where *mark was last set (if it was set, within deflate's
  // 32 KiB window); *mark moves here. A mark is one text's own: the same bytes every time.
  void repeat(size_t at, size_t len, uint64_t* mark) {
    uint64_t here = consumed_ + at + 1;  // +1: a mark of 0 was never set
    uint64_t last = *mark;
    *mark = here;
    if (last != 0 && here - last <= kWindow && len >= kMinMatch) {
      const uint32_t distance = static_cast<uint32_t>(here - last);
      // Texts written next to each other before as now (a module's arguments and the key after
      // them) make one back-reference.
      if (!repeats_.empty() && repeats_.back().at + repeats_.back().len == at &&
          repeats_.back().distance == distance) {
        repeats_.back().len += len;
        return;
      }
      repeats_.push_back(Repeat{at, len, distance});
    }
  }

  // Compresses `size` bytes and appends the compressed bytes that are ready to *out; kSync makes
  // all input so far decodable from *out, kFinish ends the gzip member (trailer included).
  bool compress(const char* data, size_t size, Flush flush, std::string* out);

  // Forgets the repeats announced since the last compress() (their text was dropped).
  void drop_pending() { repeats_.clear(); }

 private:
  static constexpr size_t kWindow = 32768;
  static constexpr size_t kMinMatch = 3;
  struct Repeat {
    size_t at, len;
    uint32_t distance;
  };
  struct Code {
    uint32_t bits;  // bit-reversed Huffman code (deflate sends codes from their first bit)
    uint8_t length;
  };

  // The bit writer's state. compress() keeps it in a local that its inlined helpers share, so
  // it stays in registers: stores through the output's char pointer may alias any member, and
  // members would be reloaded after every store.
  struct Bits {
    uint64_t buffer;
    unsigned count;
    char* cursor;
    void put(uint64_t bits, unsigned n) {
      buffer |= bits << count;
      count += n;
      spill();
    }
    void spill() {
      if (count >= 32) {
        uint32_t word = static_cast<uint32_t>(buffer);  // little-endian, as deflate packs bits
        std::memcpy(cursor, &word, 4);
        cursor += 4;
        buffer >>= 32;
        count -= 32;
      }
    }
  };
  // put_match's last distance and its code: in a steady loop an event's repeats all lie one
  // event back.
  struct LastDistance {
    uint32_t distance, bits;
    unsigned count;
  };
  void put_literals(Bits& w, const unsigned char* p, size_t n) const;
  void put_match(Bits& w, LastDistance& last, size_t length, uint32_t distance) const;
  void put_text(Bits& w, LastDistance& last, const char* block, size_t from, size_t to);
  void begin_block(Bits& w);
  void end_block(Bits& w);
  static void align_to_byte(Bits& w);

  uint64_t consumed_ = 0;  // text bytes compressed so far (the stream position of the next one)
  uint32_t crc_ = 0;
  bool ready_ = false, started_ = false, in_block_ = false, finished_ = false;
  std::vector<Repeat> repeats_;
  LastDistance last_distance_{0, 0, 0};
  uint64_t bit_buffer_ = 0;  // bits not yet written, between compress() calls (< 32 of them)
  unsigned bit_count_ = 0;
  std::unique_ptr<char[]> work_;  // compress()'s output before it is appended to the caller's
  size_t work_size_ = 0;
  std::vector<uint64_t> recent_;  // the matcher's hash table: stream position + 1 of 4-byte runs
  Code literal_[286];
  // Two literals' codes joined, indexed by the two bytes as a little-endian 16-bit value, with
  // the joined length from bit kPairLengthShift up (0: too long, send them one by one). The
  // bytes of numbers have short codes, so nearly every pair a trace sends is here.
  static constexpr unsigned kPairLengthShift = 26;
  std::vector<uint32_t> literal_pairs_;
  Code distance_[30];
  uint32_t length_bits_[259];  // a match length's code and extra bits, ready to send
  uint8_t length_count_[259];
  std::vector<Code> header_;  // a block's header: its code tables (the same for every block)
};

}  // namespace fqntrace
