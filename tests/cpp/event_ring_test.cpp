// The ring's drop accounting and its wake-up signal (buffer/event_ring.h), and the registry's
// count of drops across buffers that are freed (buffer/buffer_registry.h).
#include "buffer/event_ring.h"

#include <gtest/gtest.h>

#include <vector>

#include "buffer/buffer_registry.h"

namespace fqntrace {
namespace {

RawEvent op_event(uint64_t start) {
  RawEvent e{};
  e.kind = EventKind::kOp;
  e.range.start_ns = start;
  e.range.end_ns = start + 1;
  return e;
}

std::vector<uint64_t> drain_starts(EventRing& ring) {
  std::vector<uint64_t> starts;
  ring.drain([&](const RawEvent& e) { starts.push_back(e.range.start_ns); });
  return starts;
}

// Never block, never grow: once full, the newest events are the ones lost, and each is counted.
TEST(EventRingTest, FullRingDropsNewestAndCounts) {
  EventRing ring(4);  // 16 slots
  for (uint64_t i = 0; i < 16; ++i) EXPECT_NE(ring.push(op_event(i)), EventRing::Push::kDropped);
  EXPECT_EQ(ring.push(op_event(16)), EventRing::Push::kDropped);
  EXPECT_EQ(ring.push(op_event(17)), EventRing::Push::kDropped);
  EXPECT_EQ(ring.dropped(), 2u);
  std::vector<uint64_t> starts = drain_starts(ring);
  ASSERT_EQ(starts.size(), 16u);
  for (uint64_t i = 0; i < 16; ++i) EXPECT_EQ(starts[i], i);  // the oldest sixteen, in order
  // Drained, it takes events again; the count of what was lost stays.
  EXPECT_EQ(ring.push(op_event(18)), EventRing::Push::kOk);
  EXPECT_EQ(ring.dropped(), 2u);
}

// The drain thread is woken when a ring reaches half full, then, while it stays behind, each
// time half of the room left at the last look is used: a few times per ring, not on every push
// (each signal is also where the producer looked at the drain's progress).
TEST(EventRingTest, HalfFullSignalsOncePerHalfRing) {
  EventRing ring(4);
  std::vector<int> half_full_at;
  for (int i = 0; i < 16; ++i) {
    if (ring.push(op_event(i)) == EventRing::Push::kHalfFull) half_full_at.push_back(i);
  }
  // The eighth event fills half of 16; then 12, 14, 15 and 16 of 16 (halfway to full each time).
  EXPECT_EQ(half_full_at, std::vector<int>({7, 11, 13, 14, 15}));
  drain_starts(ring);
  half_full_at.clear();
  for (int i = 0; i < 8; ++i) {
    if (ring.push(op_event(i)) == EventRing::Push::kHalfFull) half_full_at.push_back(i);
  }
  EXPECT_EQ(half_full_at, std::vector<int>({7}));  // and again once drained and refilled
}

TEST(EventRingTest, DrainReturnsOnlyPublishedEventsOnce) {
  EventRing ring(4);
  ring.push(op_event(1));
  ring.push(op_event(2));
  EXPECT_EQ(drain_starts(ring), std::vector<uint64_t>({1, 2}));
  EXPECT_TRUE(ring.empty());
  EXPECT_TRUE(drain_starts(ring).empty());
}

// The in-place form: an event built in its claimed slot reaches the drain only once published;
// a full ring claims nothing and counts the loss as push() does.
TEST(EventRingTest, ClaimedSlotIsDrainedOnlyOncePublished) {
  EventRing ring(2);  // 4 slots
  RawEvent* slot = ring.claim();
  ASSERT_NE(slot, nullptr);
  *slot = op_event(5);
  EXPECT_TRUE(drain_starts(ring).empty());  // claimed, not yet published
  EXPECT_EQ(ring.publish(), EventRing::Push::kOk);
  slot = ring.claim();
  ASSERT_NE(slot, nullptr);
  slot->range.start_ns = 6;
  EXPECT_EQ(ring.publish(), EventRing::Push::kHalfFull);  // the second of 4 fills half
  EXPECT_EQ(drain_starts(ring), std::vector<uint64_t>({5, 6}));
  for (uint64_t i = 0; i < 4; ++i) {
    slot = ring.claim();
    ASSERT_NE(slot, nullptr);
    *slot = op_event(10 + i);
    ring.publish();
  }
  EXPECT_EQ(ring.claim(), nullptr);  // full
  EXPECT_EQ(ring.dropped(), 1u);
  EXPECT_EQ(drain_starts(ring), std::vector<uint64_t>({10, 11, 12, 13}));
}

// A thread that exits with a full ring: its buffer is freed after the drain, and the events it
// dropped are still in the total the trace's tail reports.
TEST(BufferRegistryTest, RetiredBuffersDropsSurviveReaping) {
  BufferRegistry registry(2);  // 4 slots per ring
  ThreadBuffer* a = registry.add(101, "a");
  ThreadBuffer* b = registry.add(102, "b");
  for (int i = 0; i < 7; ++i) a->ring.push(op_event(i));  // 3 dropped
  for (int i = 0; i < 5; ++i) b->ring.push(op_event(i));  // 1 dropped
  EXPECT_EQ(registry.dropped_total(), 4u);

  registry.retire(a);  // not empty: kept until drained
  int visited = 0;
  registry.for_each_and_reap([&](ThreadBuffer& buffer) {
    ++visited;
    buffer.ring.drain([](const RawEvent&) {});
  });
  EXPECT_EQ(visited, 2);
  EXPECT_EQ(registry.dropped_total(), 4u);

  visited = 0;
  registry.for_each_and_reap([&](ThreadBuffer&) { ++visited; });
  EXPECT_EQ(visited, 1);  // a was freed by the previous reap

  registry.retire(b);  // empty: freed at once
  visited = 0;
  registry.for_each_and_reap([&](ThreadBuffer&) { ++visited; });
  EXPECT_EQ(visited, 0);
  EXPECT_EQ(registry.dropped_total(), 4u);
}

}  // namespace
}  // namespace fqntrace
