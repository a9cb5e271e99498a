// make_temp_dir (tests/cpp/test_util.h) in a file of its own: the sanitizer build
// (tests/sanitize/CMakeLists.txt) links it without the session helpers of test_util.cpp.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "tests/cpp/test_util.h"

namespace fqntrace::testing {

std::string make_temp_dir() {
  char tmpl[] = "/tmp/fqntrace-test-XXXXXX";
  char* dir = mkdtemp(tmpl);
  EXPECT_NE(dir, nullptr);
  return dir == nullptr ? std::string("/tmp") : std::string(dir);
}

}  // namespace fqntrace::testing
