#include "plugin/device_use.h"

#include <mutex>

namespace fqntrace::device_use {
namespace {

std::mutex g_mu;  // never on a callback's path: set by the package, read when a file ends
DeviceUse g_device;

}  // namespace

void note(bool used, const std::string& type, int count) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_device.known = true;
  if (g_device.used && !used) return;  // a device, once initialized, stays in use
  g_device.used = used;
  g_device.type = used ? type : "";
  g_device.count = used ? count : 0;
}

void collecting(bool on, const std::string& off) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_device.known = true;
  g_device.collect = on;
  g_device.collect_off = on ? off : "";
}

DeviceUse current() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_device;
}

}  // namespace fqntrace::device_use
