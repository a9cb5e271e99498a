// The observer's per-thread name cache (plugin/name_cache.h): a hit is confirmed by the bytes,
// not by the hash alone, so names whose hashes collide can never borrow each other's id.
#include "plugin/name_cache.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "buffer/intern.h"

namespace fqntrace {
namespace {

const std::string& name_of(const NameInfo& info) { return InternTable::instance().str(info.id); }

const NameInfo& lookup_with_hash(NameCache& cache, const std::string& name, uint64_t hash) {
  return cache.lookup(name.c_str(), name.size(), hash);
}

TEST(NameCacheTest, RepeatedLookupsReturnTheInternedId) {
  auto cache = std::make_unique<NameCache>();
  uint32_t id = cache->lookup("aten::mm").id;
  EXPECT_EQ(name_of(cache->lookup("aten::mm")), "aten::mm");
  EXPECT_EQ(cache->lookup("aten::mm").id, id);
  EXPECT_NE(cache->lookup("aten::addmm").id, id);
}

// Two different names with the same 64-bit hash each get their own id, in either order and
// however often they alternate.
TEST(NameCacheTest, HashCollisionNeverNamesAnOpWrongly) {
  auto cache = std::make_unique<NameCache>();
  const uint64_t kSameHash = 0x123456789abcdef1ull;
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(name_of(lookup_with_hash(*cache, "aten::add", kSameHash)), "aten::add");
    EXPECT_EQ(name_of(lookup_with_hash(*cache, "aten::mul", kSameHash)), "aten::mul");
    // Same length and same hash: only the bytes tell them apart.
    EXPECT_EQ(name_of(lookup_with_hash(*cache, "aten::sub", kSameHash)), "aten::sub");
  }
}

// More colliding names than a probe sequence holds: the home slot is overwritten, and still
// every lookup answers with the right name.
TEST(NameCacheTest, CrowdedProbeSequenceStillAnswersCorrectly) {
  auto cache = std::make_unique<NameCache>();
  const uint64_t kSameHash = 0xfedcba9876543211ull;
  for (int round = 0; round < 2; ++round) {
    for (uint32_t i = 0; i < NameCache::kProbes * 2; ++i) {
      std::string name = "test::crowded_" + std::to_string(i);
      EXPECT_EQ(name_of(lookup_with_hash(*cache, name, kSameHash)), name);
    }
  }
}

// A name is classified once per thread, and what the observer needs comes with the id.
TEST(NameCacheTest, CachedInfoKeepsClassification) {
  auto cache = std::make_unique<NameCache>();
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(cache->lookup("autograd::engine::evaluate_function: MmBackward0").engine_eval);
    EXPECT_NE(cache->lookup("aten::mm").flop_kind, 0);
    const NameInfo& c = cache->lookup("c10d::allreduce_");
    EXPECT_NE(c.collective, 0);
    EXPECT_FALSE(c.collective_work);
    EXPECT_EQ(InternTable::instance().str(c.collective_name_id), "allreduce");
    EXPECT_TRUE(cache->lookup("gloo:all_reduce").collective_work);
    EXPECT_EQ(cache->lookup("aten::relu").collective, 0);
    // The one bit the op's start tests before any of the rare work: set for FLOP-counted ops,
    // collectives and Dynamo's regions, clear for the rest.
    EXPECT_TRUE(cache->lookup("aten::mm").special);
    EXPECT_TRUE(c.special);
    EXPECT_TRUE(cache->lookup("gloo:all_reduce").special);
    EXPECT_TRUE(cache->lookup("Torch-Compiled Region: 0/0").special);
    EXPECT_FALSE(cache->lookup("aten::relu").special);
    EXPECT_FALSE(cache->lookup("autograd::engine::evaluate_function: MmBackward0").special);
  }
}

// A pointer-keyed lookup trusts the address only within one epoch: once the epoch changes (an
// operator was deregistered), the same address holding another name is looked up afresh.
TEST(NameCacheTest, PointerKeyedLookupForgetsOnNewEpoch) {
  auto cache = std::make_unique<NameCache>();
  char text[32];
  std::snprintf(text, sizeof(text), "aten::add");
  EXPECT_EQ(name_of(cache->lookup_stable(text, std::strlen(text), 1, true)), "aten::add");
  EXPECT_EQ(name_of(cache->lookup_stable(text, std::strlen(text), 1, true)), "aten::add");
  std::snprintf(text, sizeof(text), "aten::mul_scalar_xyz");  // the address reused
  EXPECT_EQ(name_of(cache->lookup_stable(text, std::strlen(text), 2, true)),
            "aten::mul_scalar_xyz");
  EXPECT_EQ(name_of(cache->lookup_stable(text, std::strlen(text), 2, true)),
            "aten::mul_scalar_xyz");
  // The byte-checked lookup and the pointer-keyed one agree on ids and classification.
  EXPECT_EQ(cache->lookup_stable(text, std::strlen(text), 2, true).id, cache->lookup(text).id);
  std::snprintf(text, sizeof(text), "aten::mm");
  EXPECT_EQ(cache->lookup_stable(text, std::strlen(text), 3, true).flop_kind,
            cache->lookup("aten::mm").flop_kind);
}

// The hash reads a long name's first word and last two only: names that differ in the middle
// alone hash alike, and still each keep their own id.
TEST(NameCacheTest, NamesDifferingOnlyInTheMiddleKeepTheirOwnIds) {
  auto cache = std::make_unique<NameCache>();
  const std::string a = "autograd::engine::evaluate_function: torch::A::Middle::MulBackward0";
  const std::string b = "autograd::engine::evaluate_function: torch::B::Middle::MulBackward0";
  ASSERT_EQ(hash_name(a.c_str(), a.size()), hash_name(b.c_str(), b.size()));
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(name_of(cache->lookup(a.c_str())), a);
    EXPECT_EQ(name_of(cache->lookup(b.c_str())), b);
  }
  EXPECT_NE(cache->lookup(a.c_str()).id, cache->lookup(b.c_str()).id);
}

TEST(NameCacheTest, HashIsNeverZero) {
  for (const char* s : {"", "a", "abcd", "abcdefgh", "aten::_scaled_dot_product_flash_attention"}) {
    EXPECT_NE(hash_name(s, std::char_traits<char>::length(s)), 0u);
  }
}

}  // namespace
}  // namespace fqntrace
