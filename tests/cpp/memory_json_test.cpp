// The memory events' JSON (exporters/memory_json.h).
#include "exporters/memory_json.h"

#include <gtest/gtest.h>

using namespace fqntrace;

TEST(MemoryJsonTest, DeviceLabels) {
  EXPECT_EQ(json::device_label(0, -1), "cpu");
  EXPECT_EQ(json::device_label(1, 3), "cuda:3");
  EXPECT_EQ(json::device_label(12, 0), "xpu:0");
}
