#include "exporters/gzip_stream.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <queue>
#include <utility>

#include "exporters/common_length.h"
#include "exporters/crc32.h"

namespace fqntrace {
namespace {

constexpr unsigned kHashBits = 13;
// Unannounced text shorter than this is sent as literals: numbers and separators between
// repeats, where a search would find nothing worth its cost.
constexpr size_t kSearchFrom = 24;

// The lengths of a Huffman code for `weights` (every symbol gets a code: all weights are > 0),
// none longer than max_bits: weights are evened out until the tree is shallow enough.
std::vector<uint8_t> huffman_lengths(std::vector<uint64_t> weights, unsigned max_bits) {
  const size_t n = weights.size();
  for (;;) {
    using Entry = std::pair<uint64_t, size_t>;  // weight, node
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    std::vector<size_t> parent(2 * n, 0);
    for (size_t i = 0; i < n; ++i) queue.push({weights[i], i});
    size_t next = n;
    while (queue.size() > 1) {
      Entry a = queue.top();
      queue.pop();
      Entry b = queue.top();
      queue.pop();
      parent[a.second] = parent[b.second] = next;
      queue.push({a.first + b.first, next++});
    }
    const size_t root = next - 1;
    std::vector<uint8_t> lengths(n);
    unsigned deepest = 0;
    for (size_t i = 0; i < n; ++i) {
      unsigned depth = 0;
      for (size_t at = i; at != root; at = parent[at]) ++depth;
      lengths[i] = static_cast<uint8_t>(depth);
      deepest = std::max(deepest, depth);
    }
    if (deepest <= max_bits) return lengths;
    for (uint64_t& w : weights) w = (w + 1) / 2;
  }
}

uint32_t reversed(uint32_t code, unsigned length) {
  uint32_t r = 0;
  for (unsigned i = 0; i < length; ++i) r |= ((code >> i) & 1u) << (length - 1 - i);
  return r;
}

// Canonical codes for `lengths` (RFC 1951 3.2.2), bit-reversed for sending.
template <typename CodeT>
void canonical_codes(const std::vector<uint8_t>& lengths, CodeT* codes) {
  unsigned count[16] = {0};
  for (uint8_t l : lengths) ++count[l];
  count[0] = 0;
  uint32_t next[16] = {0};
  uint32_t code = 0;
  for (unsigned bits = 1; bits < 16; ++bits) {
    code = (code + count[bits - 1]) << 1;
    next[bits] = code;
  }
  for (size_t s = 0; s < lengths.size(); ++s) {
    codes[s].length = lengths[s];
    codes[s].bits = lengths[s] != 0 ? reversed(next[lengths[s]]++, lengths[s]) : 0;
  }
}

// What trace text looks like to deflate, once a writer announces its repeats: mostly digits
// (times, durations, ids) and a few punctuation marks, then back-references of the lengths of the
// keys and cached heads, a few hundred bytes to a few KiB back. Any byte stays possible.
std::vector<uint64_t> literal_weights() {
  std::vector<uint64_t> w(286, 1);
  for (int c = 32; c < 127; ++c) w[c] = 3;
  for (int c = '0'; c <= '9'; ++c) w[c] = 120;
  w['.'] = 30;
  w[','] = w['"'] = w['\n'] = 20;
  w[':'] = w['}'] = 10;
  w['{'] = 5;
  for (int s = 257; s <= 285; ++s) w[s] = 6;
  w[261] = w[263] = w[270] = 20;  // 7, 9 and 19 bytes: the keys between numbers
  return w;
}

std::vector<uint64_t> distance_weights() {
  std::vector<uint64_t> w(30, 1);
  for (int c = 10; c < 14; ++c) w[c] = 4;
  for (int c = 14; c < 18; ++c) w[c] = 20;
  for (int c = 18; c < 22; ++c) w[c] = 10;
  for (int c = 22; c < 26; ++c) w[c] = 6;
  for (int c = 26; c < 30; ++c) w[c] = 3;
  return w;
}

constexpr uint16_t kLengthBase[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr uint8_t kLengthExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
// The order in which a dynamic block sends its code-length code (RFC 1951 3.2.7).
constexpr uint8_t kCodeLengthOrder[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                          11, 4,  12, 3, 13, 2, 14, 1, 15};

}  // namespace

GzipStream::GzipStream() = default;

bool GzipStream::init(std::string* error) {
  try {
    std::vector<uint8_t> literal_lengths = huffman_lengths(literal_weights(), 15);
    std::vector<uint8_t> distance_lengths = huffman_lengths(distance_weights(), 15);
    canonical_codes(literal_lengths, literal_);
    canonical_codes(distance_lengths, distance_);
    for (unsigned s = 0; s < 29; ++s) {
      const Code& c = literal_[257 + s];
      unsigned last =
          s == 27 ? 257 : kLengthBase[s] + (1u << kLengthExtra[s]) - 1;  // 258: code 285
      for (unsigned len = kLengthBase[s]; len <= last && len <= 258; ++len) {
        length_bits_[len] = c.bits | ((len - kLengthBase[s]) << c.length);
        length_count_[len] = static_cast<uint8_t>(c.length + kLengthExtra[s]);
      }
    }
    // The block header: both tables' code lengths, sent with a code-length code fitted to them
    // (no run-length codes: the header is the same for every block, ~300 bytes).
    std::vector<uint8_t> all = literal_lengths;
    all.insert(all.end(), distance_lengths.begin(), distance_lengths.end());
    std::vector<uint64_t> cl_weights(19, 0);
    for (uint8_t l : all) ++cl_weights[l];
    std::vector<uint64_t> used_weights;
    std::vector<size_t> used_symbols;
    for (size_t s = 0; s < 19; ++s) {
      if (cl_weights[s] != 0) {
        used_weights.push_back(cl_weights[s]);
        used_symbols.push_back(s);
      }
    }
    std::vector<uint8_t> used_lengths = huffman_lengths(used_weights, 7);
    std::vector<uint8_t> cl_lengths(19, 0);
    for (size_t i = 0; i < used_symbols.size(); ++i) cl_lengths[used_symbols[i]] = used_lengths[i];
    Code cl_codes[19];
    canonical_codes(cl_lengths, cl_codes);
    header_.clear();
    header_.push_back({2u << 1, 3});    // BFINAL 0, BTYPE 2 (dynamic Huffman)
    header_.push_back({286 - 257, 5});  // HLIT
    header_.push_back({30 - 1, 5});     // HDIST
    header_.push_back({19 - 4, 4});     // HCLEN
    for (uint8_t s : kCodeLengthOrder) header_.push_back({cl_lengths[s], 3});
    for (uint8_t l : all) header_.push_back(cl_codes[l]);
    literal_pairs_.assign(size_t{1} << 16, 0);
    for (unsigned first = 0; first < 256; ++first) {
      for (unsigned second = 0; second < 256; ++second) {
        const Code& a = literal_[first];
        const Code& b = literal_[second];
        unsigned joined = a.length + b.length;
        if (joined < kPairLengthShift) {
          literal_pairs_[first | second << 8] =
              (a.bits | b.bits << a.length) | static_cast<uint32_t>(joined) << kPairLengthShift;
        }
      }
    }
    recent_.assign(size_t{1} << kHashBits, 0);
    repeats_.reserve(1 << 16);
  } catch (const std::exception&) {
    *error = "cannot start gzip compression (out of memory)";
    return false;
  }
  ready_ = true;
  return true;
}

// The helpers below are inlined into compress(), which holds the bit writer in a local.
#define FQNTRACE_INLINE inline __attribute__((always_inline))

FQNTRACE_INLINE void GzipStream::put_literals(Bits& w, const unsigned char* p, size_t n) const {
  const Code* const codes = literal_;
  const uint32_t* const pairs = literal_pairs_.data();
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {  // two codes (<= 30 bits) per check
    uint16_t two;
    std::memcpy(&two, p + i, 2);  // little-endian: p[i] in the low byte
    const uint32_t joined = pairs[two];
    if (joined != 0) {
      w.buffer |= static_cast<uint64_t>(joined & ((1u << kPairLengthShift) - 1)) << w.count;
      w.count += joined >> kPairLengthShift;
    } else {
      const Code a = codes[p[i]], b = codes[p[i + 1]];
      w.buffer |= static_cast<uint64_t>(a.bits) << w.count;
      w.count += a.length;
      w.buffer |= static_cast<uint64_t>(b.bits) << w.count;
      w.count += b.length;
    }
    w.spill();
  }
  if (i < n) w.put(codes[p[i]].bits, codes[p[i]].length);
}

FQNTRACE_INLINE void GzipStream::put_match(Bits& w, LastDistance& last, size_t length,
                                           uint32_t distance) const {
  if (distance != last.distance) {
    uint32_t x = distance - 1;
    if (x < 4) {
      last.bits = distance_[x].bits;
      last.count = distance_[x].length;
    } else {
      unsigned n = 31 - static_cast<unsigned>(__builtin_clz(x));  // x has n + 1 bits, n >= 2
      const Code& c = distance_[2 * n + ((x >> (n - 1)) & 1u)];
      last.bits = c.bits | ((x & ((1u << (n - 1)) - 1)) << c.length);
      last.count = c.length + n - 1;
    }
    last.distance = distance;
  }
  while (length > 258) {  // rare: at most 258 per match, never a tail shorter than 3
    size_t n = length - 258 >= 3 ? 258 : length - 3;
    w.put(length_bits_[n], length_count_[n]);  // <= 20 bits
    w.put(last.bits, last.count);              // <= 28 bits
    length -= n;
  }
  w.put(length_bits_[length], length_count_[length]);
  w.put(last.bits, last.count);
}

FQNTRACE_INLINE void GzipStream::put_text(Bits& w, LastDistance& last, const char* block,
                                          size_t from, size_t to) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(block);
  if (to - from < kSearchFrom) {
    put_literals(w, b + from, to - from);
    return;
  }
  // Greedy: the last position of each 4-byte run (hashed); matches only inside this block,
  // whose bytes are at hand.
  uint64_t* const recent = recent_.data();
  const uint64_t consumed = consumed_;
  size_t literals_from = from;
  size_t i = from;
  while (i + 4 <= to) {
    uint32_t v;
    std::memcpy(&v, b + i, 4);
    uint64_t& slot = recent[(v * 2654435761u) >> (32 - kHashBits)];
    uint64_t seen = slot;
    slot = consumed + i + 1;
    if (seen > consumed && consumed + i + 1 - seen <= kWindow) {
      size_t j = static_cast<size_t>(seen - 1 - consumed);
      uint32_t u;
      std::memcpy(&u, b + j, 4);
      if (u == v) {
        size_t limit = std::min<size_t>(258, to - i);
        size_t len = 4 + common_length(b + j + 4, b + i + 4, limit - 4);
        put_literals(w, b + literals_from, i - literals_from);
        put_match(w, last, len, static_cast<uint32_t>(i - j));
        i += len;
        literals_from = i;
        continue;
      }
    }
    ++i;
  }
  put_literals(w, b + literals_from, to - literals_from);
}

void GzipStream::begin_block(Bits& w) {
  for (const Code& c : header_) w.put(c.bits, c.length);
  in_block_ = true;
}

void GzipStream::end_block(Bits& w) {
  w.put(literal_[256].bits, literal_[256].length);
  in_block_ = false;
}

void GzipStream::align_to_byte(Bits& w) {
  w.put(0, (8 - w.count % 8) % 8);
  while (w.count > 0) {
    *w.cursor++ = static_cast<char>(w.buffer & 0xFF);
    w.buffer >>= 8;
    w.count -= 8;
  }
}

bool GzipStream::compress(const char* data, size_t size, Flush flush, std::string* out) {
  if (!ready_ || finished_) return false;
  // Worst case: 15 bits per byte, the block header, gzip's header and trailer, a flush. Written
  // into our own buffer, then appended: resizing *out would first fill all of that with zeros.
  const size_t bound = 2 * size + header_.size() * 2 + 64;
  if (work_size_ < bound) {
    work_.reset(new (std::nothrow) char[bound]);
    work_size_ = work_ ? bound : 0;
    if (!work_) return false;
  }
  Bits w{bit_buffer_, bit_count_, work_.get()};
  if (!started_) {
    static const unsigned char kHeader[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};  // deflate, Unix
    std::memcpy(w.cursor, kHeader, sizeof kHeader);
    w.cursor += sizeof kHeader;
    started_ = true;
  }
  if (size > 0) {
    crc_ = crc32_update(crc_, data, size);
    if (!in_block_) begin_block(w);
    LastDistance last = last_distance_;
    size_t at = 0;
    const Repeat* r = repeats_.data();
    const Repeat* const end = r + repeats_.size();
    for (;; ++r) {  // the text before each repeat, the repeat; then the text after the last
      if (r != end && (r->at < at || r->at + r->len > size)) continue;  // never: in order, inside
      put_text(w, last, data, at, r != end ? r->at : size);
      if (r == end) break;
      put_match(w, last, r->len, r->distance);
      at = r->at + r->len;
    }
    last_distance_ = last;
    consumed_ += size;
  }
  repeats_.clear();
  if (flush == Flush::kSync && in_block_) {
    end_block(w);
    w.put(0, 3);  // an empty stored block: BFINAL 0, BTYPE 0, then LEN 0 and NLEN 0xFFFF
    align_to_byte(w);
    static const unsigned char kEmpty[4] = {0, 0, 0xFF, 0xFF};
    std::memcpy(w.cursor, kEmpty, 4);
    w.cursor += 4;
  } else if (flush == Flush::kFinish) {
    if (in_block_) end_block(w);
    w.put(1 | (1u << 1), 3);  // BFINAL 1, BTYPE 1 (fixed codes) ...
    w.put(0, 7);              // ... holding only end-of-block (fixed code 256: seven zero bits)
    align_to_byte(w);
    uint32_t trailer[2] = {crc_, static_cast<uint32_t>(consumed_)};  // little-endian, as gzip's
    std::memcpy(w.cursor, trailer, sizeof trailer);
    w.cursor += sizeof trailer;
    finished_ = true;
  }
  bit_buffer_ = w.buffer;
  bit_count_ = w.count;
  out->append(work_.get(), static_cast<size_t>(w.cursor - work_.get()));
  return true;
}

}  // namespace fqntrace
