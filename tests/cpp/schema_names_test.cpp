// plugin/schema_names.h against real torch: which RecordFunction names point into a registered
// operator's schema, and the epoch that deregistering an operator moves.
#include "plugin/schema_names.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/library.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugin/rf_name.h"

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

// plugin/rf_name.h reads the name out of the RecordFunction: it must be what name() gives, with
// its length, and schema-named exactly when is_schema_name() says so, for every form of name.
struct ReadName {
  std::string name;
  bool same_pointer;
  size_t size;
  bool schema;
  bool is_schema_name;
};
std::vector<ReadName>* g_read = nullptr;

std::unique_ptr<at::ObserverContext> read_name(const at::RecordFunction& fn) {
  rf_name::Name n = rf_name::of(fn);
  if (g_read != nullptr) {
    g_read->push_back(
        {fn.name(), n.data == fn.name(), n.size, n.schema, schema_names::is_schema_name(fn)});
  }
  return nullptr;
}

TEST(SchemaNamesTest, InlineNameIsWhatRecordFunctionNames) {
  EXPECT_EQ(FQNTRACE_RF_NAME_INLINE, 1) << "the torch we build against is one rf_name.h reads";
  schema_names::init();
  std::vector<ReadName> read;
  g_read = &read;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&read_name)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  {
    at::Tensor a = at::ones({4});
    at::Tensor b = at::mul(at::add(a, a), 2);
    { RECORD_USER_SCOPE("short scope"); }
    {
      RECORD_FUNCTION("a function range whose name is long enough for the heap",
                      std::vector<c10::IValue>());
    }
    { RECORD_USER_SCOPE(""); }
  }
  at::removeCallback(handle);
  g_read = nullptr;
  ASSERT_GE(read.size(), 5u);
  int schema_named = 0;
  for (const ReadName& r : read) {
    EXPECT_TRUE(r.same_pointer) << r.name;
    EXPECT_EQ(r.size, r.name.size()) << r.name;
    EXPECT_EQ(r.schema, r.is_schema_name) << r.name;
    schema_named += r.schema;
  }
  EXPECT_GE(schema_named, 2);  // aten::add, aten::mul (and what they call)
  EXPECT_LT(schema_named, static_cast<int>(read.size()));
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
