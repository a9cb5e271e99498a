// FQNTRACE_DEVICE's lines: a device event as Kineto's categories and args on its stream's track,
// and the tail's device object with the collector's counts.
#include "exporters/device_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "drain/device_events.h"
#include "exporters/json_text.h"

using namespace fqntrace;

TEST(DeviceJsonTest, KernelLineCarriesFqnPhaseStreamAndKinetosIds) {
  DeviceEvent d;
  d.device = 1;
  d.stream = 7;
  d.lane = 1;
  const std::string cat = "kernel", name = "void k<\"float\">(float*)\n", fqn = "Net.conv";
  const std::string phase = "backward";
  DeviceEventRecord r{cat,   name, device_track_tid(d), 1, 7, 1234567, 41407, fqn, phase,
                      57541, 12353};
  std::string out;
  bool first = true;
  json::append_device_event(out, r, 4242, ",\n", &first);
  nlohmann::json e = nlohmann::json::parse(out);
  EXPECT_EQ(e.at("ph"), "X");
  EXPECT_EQ(e.at("cat"), "kernel");
  EXPECT_EQ(e.at("name"), name);  // any name survives the round trip
  EXPECT_EQ(e.at("pid"), 4242);   // fqntrace's process: ranks never collide in a merge
  EXPECT_EQ(e.at("tid"), 0x70000000u | 1u << 20 | 1u << 16 | 7u);
  EXPECT_EQ(e.at("ts").get<double>(), 1234.567);
  EXPECT_EQ(e.at("dur").get<double>(), 41.407);
  EXPECT_EQ(e.at("args"), nlohmann::json::parse(R"({"fqn": "Net.conv", "phase": "backward",
      "device": 1, "stream": 7, "correlation": 57541, "External id": 12353})"));
  EXPECT_EQ(device_track_name(d), "GPU 1 stream 7 (2)");

  // Without Kineto's ids the args leave them out.
  DeviceEventRecord bare{cat, name, 0, 0, 0, 0, 0, fqn, phase, -1, -1};
  out.clear();
  json::append_device_event(out, bare, 1, ",\n", &first);
  EXPECT_FALSE(nlohmann::json::parse(out.substr(2)).at("args").contains("correlation"));
}

TEST(DeviceJsonTest, TheTailSaysWhatWasCollected) {
  DeviceUse device;
  device.known = true;
  device.used = true;
  device.type = "cuda";
  device.count = 2;
  std::string out;
  json::append_device(out, device);
  EXPECT_EQ(out, R"(, "device": {"used": true, "type": "cuda", "count": 2})");
  device.collect = true;
  device.recordings = 3;
  device.collected = 10;
  device.not_attributed = 1;
  device.ops = 40;
  device.ops_joined = 40;
  out.clear();
  json::append_device(out, device);
  EXPECT_EQ(out, R"(, "device": {"used": true, "type": "cuda", "count": 2, "collected": )"
                 R"({"recordings": 3, "events": 10, "not_attributed": 1, "ops": 40, )"
                 R"("ops_joined": 40}})");
  DeviceUse none;
  none.known = true;
  none.collect = true;
  none.collect_off = "no GPU here";
  out.clear();
  json::append_device(out, none);
  EXPECT_EQ(nlohmann::json::parse("{" + out.substr(2) + "}").at("device").at("collected").at("off"),
            "no GPU here");
}
