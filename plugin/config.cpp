#include "plugin/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace fqntrace {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Parses a non-negative integer environment value; `fallback` when unset or malformed.
int env_int(const EnvLookup& env, const char* name, int fallback) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 0 || n > 1000000) return fallback;
  return static_cast<int>(n);
}

// Where a bad value is quoted in a message: control characters escaped, so the message stays
// one line whatever the value holds.
std::string printable(const std::string& value) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : value) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// A switch variable: 1/true/yes/on and 0/false/no/off (any case); anything else keeps the
// default off and adds a warning (tracing goes on without the option).
bool env_switch(const EnvLookup& env, const char* name, std::vector<std::string>* warnings) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return false;
  std::string lower;
  for (const char* p = v; *p != '\0'; ++p)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*p))));
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  warnings->push_back(std::string(name) + "=" + printable(v) +
                      " is not a switch value; it stays off. Set it to 1 (or true, yes, on) or 0.");
  return false;
}

// A switch that is on unless set to an off value.
bool env_switch_on(const EnvLookup& env, const char* name, const char* stays_on,
                   std::vector<std::string>* warnings) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return true;
  std::vector<std::string> bad;
  bool on = env_switch(env, name, &bad);
  if (bad.empty()) return on;
  warnings->push_back(std::string(name) + "=" + printable(v) + " is not a switch value; " +
                      stays_on + ". Set it to 0 (or false, no, off) or 1.");
  return true;
}

// FQNTRACE_CAPTURE_SLOW / _STEPS / _MAX (docs/on-demand.md): a bad value gives a warning and
// leaves the option as it was (the slow-step trigger off, or the default count).
void parse_capture_settings(const EnvLookup& env, Config* config) {
  if (const char* slow = env("FQNTRACE_CAPTURE_SLOW"); slow != nullptr && *slow != '\0') {
    char* end = nullptr;
    double x = std::strtod(slow, &end);
    if (end != slow && *end == '\0' && x > 1.0 && x < 1e6) {
      config->capture_slow = x;
    } else {
      config->warnings.push_back("FQNTRACE_CAPTURE_SLOW=" + printable(slow) +
                                 " is not a factor above 1; no slow-step captures. Set it to e.g. "
                                 "2 (a step twice as slow as the recent median is captured).");
    }
  }
  auto count = [&](const char* name, uint32_t* out, uint32_t most) {
    const char* v = env(name);
    if (v == nullptr || *v == '\0') return;
    int n = env_int(env, name, -1);
    if (n >= 1 && static_cast<uint32_t>(n) <= most) {
      *out = static_cast<uint32_t>(n);
    } else {
      config->warnings.push_back(std::string(name) + "=" + printable(v) +
                                 " is not a whole number from 1 to " + std::to_string(most) + "; " +
                                 std::to_string(*out) + " is used.");
    }
  };
  count("FQNTRACE_CAPTURE_STEPS", &config->capture_steps, 100000);
  count("FQNTRACE_CAPTURE_MAX", &config->capture_max, 100000);
}

}  // namespace

ConfigResult parse_config(const char* value, const EnvLookup& env, long pid) {
  ConfigResult result;
  if (value == nullptr || *value == '\0') return result;
  const std::string raw(value);
  Config config;
  config.raw_value = raw;
  config.rank = env_int(env, "RANK", 0);
  const char* rank_value = env("RANK");
  config.rank_given = rank_value != nullptr && *rank_value != '\0';
  config.world_size = env_int(env, "WORLD_SIZE", 1);
  const char* world_value = env("WORLD_SIZE");
  if (world_value != nullptr && *world_value != '\0' && config.rank >= config.world_size) {
    // A launcher never sets this; the trace could not say which process of the job it is.
    result.problem = "RANK=" + std::to_string(config.rank) +
                     " is not below WORLD_SIZE=" + std::to_string(config.world_size);
    result.fix =
        "Set RANK and WORLD_SIZE as a launcher does (0 <= RANK < WORLD_SIZE), or unset both.";
    return result;
  }

  // Expand {pid} and {rank}; anything else in braces is a mistake worth reporting.
  std::string out;
  bool has_rank = false;
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '}') {
      result.problem = "unmatched '}' at position " + std::to_string(i);
      result.fix = "Use only the placeholders {pid} and {rank}.";
      return result;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = raw.find('}', i);
    if (close == std::string::npos) {
      result.problem = "unmatched '{' at position " + std::to_string(i);
      result.fix = "Use only the placeholders {pid} and {rank}.";
      return result;
    }
    std::string name = raw.substr(i + 1, close - i - 1);
    if (name == "pid") {
      out += std::to_string(pid);
    } else if (name == "rank") {
      out += std::to_string(config.rank);
      has_rank = true;
    } else {
      result.problem = "unknown placeholder {" + name + "}";
      result.fix = "Use only the placeholders {pid} and {rank}.";
      return result;
    }
    i = close;
  }

  // run.json.gz / run.jsonl.gz: the same formats, gzip-compressed as they are written.
  const std::string gz = ends_with(out, ".gz") ? ".gz" : "";
  const std::string plain = out.substr(0, out.size() - gz.size());
  if (ends_with(plain, ".jsonl")) {
    config.format = Format::kJsonLines;
  } else if (ends_with(plain, ".json")) {
    config.format = Format::kChrome;
  } else {
    size_t slash = out.find_last_of('/');
    size_t dot = out.find_last_of('.');
    std::string ext = (dot == std::string::npos || (slash != std::string::npos && dot < slash))
                          ? std::string("no extension")
                          : "extension '" + out.substr(dot) + "'";
    result.problem = "unknown trace format (" + ext + ")";
    result.fix =
        "End the path with .json (Chrome trace) or .jsonl (JSON Lines), or with "
        ".json.gz / .jsonl.gz for gzip.";
    return result;
  }

  // Several ranks writing one file would overwrite each other: give each rank its own file.
  if (config.world_size > 1 && !has_rank) {
    size_t dot = plain.find_last_of('.');
    out = out.substr(0, dot) + ".rank" + std::to_string(config.rank) + out.substr(dot);
    if (config.rank == 0) {
      config.note =
          "FQNTRACE=" + raw + " has no {rank} and WORLD_SIZE=" + std::to_string(config.world_size) +
          ": each rank writes its own file (rank inserted before the extension, e.g. " + out + ").";
    }
  }
  // A child that inherited FQNTRACE from a traced process (multiprocessing spawn, a spawn
  // DataLoader worker, subprocess, mp.spawn) writes its own file, never its parent's. {pid}
  // already tells them apart. torchrun's workers inherit nothing: the launcher does not trace.
  const char* parent = env(kParentVariable);
  const char* parent_value = parent == nullptr ? nullptr : std::strchr(parent, ':');
  if (parent_value != nullptr && std::strtol(parent, nullptr, 10) != pid &&
      raw == parent_value + 1) {
    config.inherited = true;
    if (raw.find("{pid}") == std::string::npos) {
      size_t dot = out.find_last_of('.');
      out = out.substr(0, dot) + ".pid" + std::to_string(pid) + out.substr(dot);
    }
  }
  config.path = out;

  // Extra outputs beside the main one share its stem: trace.json → trace.jsonl, trace.summary.json.
  const std::string stem = out.substr(0, out.find_last_of('.', out.size() - gz.size() - 1));
  config.stem = stem;
  config.outputs.push_back(
      {config.format == Format::kChrome ? Output::Kind::kChrome : Output::Kind::kJsonLines, out});
  if (const char* formats = env("FQNTRACE_FORMATS")) {
    std::string list(formats);
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      std::string item =
          list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
      if (item.empty()) continue;
      Output o;
      if (item == "chrome") {
        o = {Output::Kind::kChrome, stem + ".json"};
      } else if (item == "jsonl") {
        o = {Output::Kind::kJsonLines, stem + ".jsonl"};
      } else if (item == "chrome.gz") {
        o = {Output::Kind::kChrome, stem + ".json.gz"};
      } else if (item == "jsonl.gz") {
        o = {Output::Kind::kJsonLines, stem + ".jsonl.gz"};
      } else if (item == "summary") {
        config.summary = true;  // not an output of the library's: no exporter writes it
        continue;
      } else {
        result.problem = "FQNTRACE_FORMATS has an unknown format '" + item + "'";
        result.fix =
            "Set FQNTRACE_FORMATS to a comma-separated list of chrome, jsonl, summary "
            "(chrome.gz, jsonl.gz: gzip).";
        return result;
      }
      bool duplicate = false;
      for (const auto& existing : config.outputs) duplicate |= existing.path == o.path;
      if (!duplicate) config.outputs.push_back(o);
    }
  }
  if (const char* clock = env("FQNTRACE_CLOCK")) {
    std::string value(clock);
    if (value == "monotonic") {
      config.monotonic_clock = true;
    } else if (!value.empty() && value != "auto") {
      // A clock choice is an optimisation detail: the default clock is always right.
      config.warnings.push_back(
          "FQNTRACE_CLOCK=" + printable(value) +
          " is unknown; the default clock is used. Set it to auto or monotonic.");
    }
  }
  config.flops = env_switch(env, "FQNTRACE_FLOPS", &config.warnings);
  config.shapes = env_switch(env, "FQNTRACE_SHAPES", &config.warnings);
  config.module_ranges = env_switch(env, "FQNTRACE_MODULE_RANGES", &config.warnings);
  config.memory = env_switch(env, "FQNTRACE_MEMORY", &config.warnings);
  // On by default: FQNTRACE_MODULE_SPANS=0 leaves out the module tracks (their bytes and drain
  // work, docs/benchmarks.md).
  config.module_spans =
      env_switch_on(env, "FQNTRACE_MODULE_SPANS", "module spans stay on", &config.warnings);
  // Opt-in: a thread CPU reading is a system call (no vDSO path), ~1-2 per module call, which
  // costs a small model's step several percent (docs/benchmarks.md).
  config.cpu_time = env_switch(env, "FQNTRACE_CPU", &config.warnings);
  if (const char* sample = env("FQNTRACE_SAMPLE"); sample != nullptr && *sample != '\0') {
    char* end = nullptr;
    double p = std::strtod(sample, &end);
    if (end != sample && *end == '\0' && p > 0.0 && p <= 1.0) {
      config.sample = p;
    } else {
      config.warnings.push_back("FQNTRACE_SAMPLE=" + printable(sample) +
                                " is not a probability in (0, 1]; every op is traced. Set it to "
                                "e.g. 0.01 to record 1 op in 100.");
    }
  }
  if (const char* steps = env("FQNTRACE_STEPS"); steps != nullptr && *steps != '\0') {
    std::string problem;
    if (!parse_steps_setting(steps, &config.steps, &config.armed, &problem)) {
      config.warning = "FQNTRACE_STEPS=" + printable(steps) + ": " + problem +
                       "; every step is traced. Set FQNTRACE_STEPS to FIRST:END or "
                       "FIRST:END:PERIOD, e.g. 10:20 (steps 10 to 19) or 10:20:100, or to demand "
                       "(armed for captures, docs/on-demand.md).";
    }
    // `demand` alone: nothing for the trace file. Beside a window: the window's steps are.
    config.trace_file = !(config.armed && config.steps.all());
    if (!config.trace_file) config.steps = StepWindow::none();
  }
  parse_capture_settings(env, &config);
  result.config = config;
  return result;
}

std::string check_path_writable(const std::string& path, std::string* fix) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      *fix = "Set FQNTRACE to a file path such as " + path + "/trace.json.";
      return "it is a directory";
    }
    if (::access(path.c_str(), W_OK) != 0) {
      *fix = "Set FQNTRACE to a writable path.";
      return "file is not writable (" + std::string(std::strerror(errno)) + ")";
    }
    return "";
  }
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *fix = "Create the directory first (mkdir -p " + dir +
           ") or set FQNTRACE to a path in an existing one.";
    return "directory " + dir + " does not exist";
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    *fix = "Set FQNTRACE to a writable path.";
    return "directory " + dir + " is not writable";
  }
  return "";
}

ConfigResult config_from_value(const char* value, const EnvLookup& env, long pid) {
  ConfigResult result = parse_config(value, env, pid);
  if (result.config) {
    std::string fix;
    std::string problem = check_path_writable(result.config->path, &fix);
    if (!problem.empty()) {
      result.config.reset();
      result.problem = problem;
      result.fix = fix;
    }
  }
  return result;
}

void mark_traced_parent(long pid, const std::string& value) {
  ::setenv(kParentVariable, (std::to_string(pid) + ":" + value).c_str(), 1);
}

ConfigResult config_from_environment() {
  return config_from_value(
      std::getenv("FQNTRACE"), [](const char* name) { return std::getenv(name); }, ::getpid());
}

}  // namespace fqntrace
