// plugin/schema_names.h against real torch: which RecordFunction names point into a registered
// operator's schema, and the epoch that deregistering an operator moves.
#include "plugin/schema_names.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <string>

namespace fqntrace {
namespace {

std::map<std::string, bool>* g_seen = nullptr;

std::unique_ptr<at::ObserverContext> remember(const at::RecordFunction& fn) {
  if (g_seen != nullptr) (*g_seen)[fn.name()] = schema_names::is_schema_name(fn);
  return nullptr;
}

TEST(SchemaNamesTest, OnlyDispatcherOpsAreSchemaNamed) {
  schema_names::init();
  std::map<std::string, bool> seen;
  g_seen = &seen;
  auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(&remember).scopes(
      {at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  {
    at::Tensor a = at::ones({4});
    at::Tensor b = at::add(a, a);
    // Names RecordFunction copies into its own std::string: short (inline) and long (heap).
    { RECORD_USER_SCOPE("short scope"); }
    {
      RECORD_FUNCTION("a function range whose name is long enough for the heap",
                      std::vector<c10::IValue>());
    }
  }
  at::removeCallback(handle);
  g_seen = nullptr;
  ASSERT_EQ(seen.count("aten::add"), 1u);
  EXPECT_TRUE(seen["aten::add"]);
  ASSERT_EQ(seen.count("short scope"), 1u);
  EXPECT_FALSE(seen["short scope"]);
  ASSERT_EQ(seen.count("a function range whose name is long enough for the heap"), 1u);
  EXPECT_FALSE(seen["a function range whose name is long enough for the heap"]);
}

TEST(SchemaNamesTest, DeregisteringAnOperatorMovesTheEpoch) {
  schema_names::init();
  uint64_t before = schema_names::epoch();
  {
    torch::Library lib(torch::Library::DEF, "fqntrace_schema_names_test", std::nullopt, __FILE__,
                       __LINE__);
    lib.def("probe(Tensor x) -> Tensor");
    EXPECT_EQ(schema_names::epoch(), before);  // registering frees nothing
  }
  EXPECT_GT(schema_names::epoch(), before);
}

}  // namespace
}  // namespace fqntrace
