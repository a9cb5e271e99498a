// OutputFile's ownership rules: a regular file is locked (a second writer is refused, so no live
// writer's file is ever truncated); a device is neither locked nor truncated, so several outputs
// may share /dev/null (the exporter benchmark writes every format there).
#include "exporters/output_file.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/cpp/test_util.h"

using namespace fqntrace;

TEST(OutputFileTest, SecondWriterOfARegularFileIsRefused) {
  std::string path = fqntrace::testing::make_temp_dir() + "/t.json";
  OutputFile first, second;
  std::string error;
  ASSERT_TRUE(first.open(path, &error)) << error;
  EXPECT_FALSE(second.open(path, &error));
  EXPECT_NE(error.find("another running process is writing"), std::string::npos) << error;
  EXPECT_TRUE(first.close(&error)) << error;
}

TEST(OutputFileTest, OutputsMayShareDevNull) {
  OutputFile a, b;
  std::string error;
  ASSERT_TRUE(a.open("/dev/null", &error)) << error;
  ASSERT_TRUE(b.open("/dev/null", &error)) << error;
  a.write("x");
  b.write("y");
  EXPECT_TRUE(a.close(&error)) << error;
  EXPECT_TRUE(b.close(&error)) << error;
}
