// A compiled graph's call list (plugin/compiled_graph.h): the same graph serves every block of
// the same shape, so each call's fqn is built under the module the graph runs for.
#include "plugin/compiled_graph.h"

#include <gtest/gtest.h>

#include "buffer/intern.h"

namespace fqntrace {
namespace {

uint32_t id(const char* s) { return InternTable::instance().intern(s); }
const std::string& str(uint32_t i) { return InternTable::instance().str(i); }

TEST(CompiledGraphTest, CallsAreNamedUnderTheModuleTheGraphRunsFor) {
  CompiledGraph graph({id("aten::addmm"), id("aten::empty"), id("aten::addmm")},
                      {".fc1", "", ".fc2"}, "Block");
  const uint32_t* under_0 = graph.fqns_under(id("Net.blocks.0"));
  const uint32_t* under_1 = graph.fqns_under(id("Net.blocks.1"));
  EXPECT_EQ(str(under_0[0]), "Net.blocks.0.fc1");
  EXPECT_EQ(str(under_0[1]), "Net.blocks.0");  // "": the module itself
  EXPECT_EQ(str(under_0[2]), "Net.blocks.0.fc2");
  EXPECT_EQ(str(under_1[2]), "Net.blocks.1.fc2");
  EXPECT_EQ(graph.fqns_under(id("Net.blocks.0")), under_0);  // built once per module
}

// A compiled function given the model, called outside every module: the model is a root,
// named by its class as ModTracker names roots.
TEST(CompiledGraphTest, OutsideEveryModuleTheRootIsNamedByItsClass) {
  CompiledGraph graph({id("aten::mm")}, {".head"}, "Net");
  EXPECT_EQ(str(graph.fqns_under(kGlobalFqnId)[0]), "Net.head");
}

// A sampled trace sees some calls only: a name the graph calls once places its op, a name it
// calls several times places none (an earlier call of it may not have been seen).
TEST(CompiledGraphTest, OnlyANameCalledOnceGivesItsCall) {
  CompiledGraph graph(
      {id("aten::addmm"), id("cpp_fused_relu_0"), id("aten::addmm"), id("aten::mm")},
      {".fc1", ".act", ".fc2", ".head"}, "");
  EXPECT_EQ(graph.only_call_named(id("cpp_fused_relu_0")), 1u);
  EXPECT_EQ(graph.only_call_named(id("aten::mm")), 3u);
  EXPECT_EQ(graph.only_call_named(id("aten::addmm")), CompiledGraph::kNotUnique);
  EXPECT_EQ(graph.only_call_named(id("aten::bmm")), CompiledGraph::kNotUnique);
  EXPECT_EQ(CompiledGraph({}, {}, "").only_call_named(id("aten::mm")), CompiledGraph::kNotUnique);
}

TEST(CompiledGraphTest, RegistryHandsOutIdsAndFindsThem) {
  uint32_t a = register_compiled_graph({id("aten::mm")}, {""}, "");
  uint32_t b = register_compiled_graph({id("aten::bmm")}, {""}, "");
  ASSERT_NE(a, 0u);
  ASSERT_NE(a, b);
  ASSERT_NE(find_compiled_graph(b), nullptr);
  EXPECT_EQ(find_compiled_graph(b)->name_id(0), id("aten::bmm"));
  EXPECT_EQ(find_compiled_graph(0), nullptr);
  EXPECT_EQ(find_compiled_graph(b + 1000), nullptr);
}

}  // namespace
}  // namespace fqntrace
