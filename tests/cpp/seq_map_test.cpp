// The (forward thread, sequence number) → fqn table that attributes autograd nodes
// (plugin/seq_map.h): bounded, so an old entry can be overwritten; a lookup must then fail
// rather than name the wrong module.
#include "plugin/seq_map.h"

#include <gtest/gtest.h>

namespace fqntrace {
namespace {

// Logical thread ids the tests own (RecordFunction hands out small ids from 1 upwards).
constexpr uint64_t kThread = SeqMap::kMaxThreads - 1;
constexpr uint64_t kOtherThread = SeqMap::kMaxThreads - 2;

TEST(SeqMapTest, LookupFindsWhatTheForwardOpRecorded) {
  SeqMap::Table* t = SeqMap::instance().table_for(kThread, 4242);
  ASSERT_NE(t, nullptr);
  SeqMap::record(t, 17, 1234, 999);
  uint32_t fqn = 0, tid = 0;
  uint64_t ts = 0;
  ASSERT_TRUE(SeqMap::instance().lookup(kThread, 17, &fqn, &ts, &tid));
  EXPECT_EQ(fqn, 1234u);
  EXPECT_EQ(ts, 999u);
  EXPECT_EQ(tid, 4242u);
}

// 65,536 nodes later the slot belongs to another node: the old one is not found (it falls back
// to its enclosing frame), the new one is.
TEST(SeqMapTest, SlotReusedAfter65536NodesFailsGracefully) {
  SeqMap::Table* t = SeqMap::instance().table_for(kThread, 4242);
  ASSERT_NE(t, nullptr);
  const int64_t old_seq = 5;
  const int64_t new_seq = old_seq + (int64_t{1} << SeqMap::kSlotsLog2);
  SeqMap::record(t, old_seq, 11, 100);
  SeqMap::record(t, new_seq, 22, 200);
  uint32_t fqn = 0, tid = 0;
  uint64_t ts = 0;
  EXPECT_FALSE(SeqMap::instance().lookup(kThread, old_seq, &fqn, &ts, &tid));
  ASSERT_TRUE(SeqMap::instance().lookup(kThread, new_seq, &fqn, &ts, &tid));
  EXPECT_EQ(fqn, 22u);
  EXPECT_EQ(ts, 200u);
}

// Sampled mode: a module scope fills its range of sequence numbers. It overwrites what an op of
// another module left under the same number (an op that creates no node carries the next
// number) and keeps an op's own record of this module, whose start the flow points at.
TEST(SeqMapTest, FillOverwritesOtherModulesAndKeepsThisModulesOp) {
  SeqMap::Table* t = SeqMap::instance().table_for(kOtherThread, 4343);
  ASSERT_NE(t, nullptr);
  SeqMap::record(t, 40, 7, 500);  // an op of module 7 carried number 40, created no node
  SeqMap::record(t, 41, 9, 600);  // the op of module 9 that created node 41
  for (int64_t seq = 40; seq < 43; ++seq) SeqMap::fill(t, seq, 9);
  uint32_t fqn = 0, tid = 0;
  uint64_t ts = 0;
  ASSERT_TRUE(SeqMap::instance().lookup(kOtherThread, 40, &fqn, &ts, &tid));
  EXPECT_EQ(fqn, 9u);
  EXPECT_EQ(ts, 0u);  // no op to point a flow at
  ASSERT_TRUE(SeqMap::instance().lookup(kOtherThread, 41, &fqn, &ts, &tid));
  EXPECT_EQ(fqn, 9u);
  EXPECT_EQ(ts, 600u);
  ASSERT_TRUE(SeqMap::instance().lookup(kOtherThread, 42, &fqn, &ts, &tid));
  EXPECT_EQ(fqn, 9u);
}

TEST(SeqMapTest, UnknownThreadsAndSequenceNumbersAreNotFound) {
  uint32_t fqn = 0, tid = 0;
  uint64_t ts = 0;
  EXPECT_FALSE(SeqMap::instance().lookup(kOtherThread, 3, &fqn, &ts, &tid));  // no table
  EXPECT_FALSE(SeqMap::instance().lookup(SeqMap::kMaxThreads, 3, &fqn, &ts, &tid));
  EXPECT_FALSE(SeqMap::instance().lookup(kThread, -1, &fqn, &ts, &tid));     // no seq
  EXPECT_FALSE(SeqMap::instance().lookup(kThread, 60000, &fqn, &ts, &tid));  // never recorded
  // A thread past the table's range records into a table no lookup reads.
  SeqMap::Table* overflow = SeqMap::instance().table_for(SeqMap::kMaxThreads, 1);
  ASSERT_NE(overflow, nullptr);
  SeqMap::record(overflow, 5, 7, 700);
  EXPECT_FALSE(SeqMap::instance().lookup(SeqMap::kMaxThreads, 5, &fqn, &ts, &tid));
  EXPECT_EQ(SeqMap::instance().table_for(SeqMap::kMaxThreads + 9, 1), overflow);
}

}  // namespace
}  // namespace fqntrace
