// Start-up: when the library is loaded (linked into a C++ program, or dlopen'ed by
// torch.ops.load_library / the Python package) and FQNTRACE is set, start the session. If the
// host is a running Python interpreter, also schedule the Python side (nn.Module record scopes)
// — looked up at run time, so the same library loads into programs without Python.
#include <dlfcn.h>
#include <unistd.h>

#include <string>

#include "plugin/config.h"
#include "plugin/log.h"
#include "plugin/session.h"

namespace fqntrace {
namespace {

using IsInitializedFn = int (*)();
using PendingCallFn = int (*)(int (*)(void*), void*);
using RunStringFn = int (*)(const char*);

RunStringFn g_run_string = nullptr;

// Runs later on the interpreter's main thread, between bytecodes, with the GIL held: never
// inside the dlopen that loaded us.
int activate_python_hooks(void*) {
  if (g_run_string == nullptr) return 0;
  g_run_string(
      "try:\n"
      "    import fqntrace._activate\n"
      "except Exception as _fqntrace_error:\n"
      "    import sys\n"
      "    sys.stderr.write('fqntrace: module names are off (the fqntrace Python package could not "
      "be imported: %s); ops are still traced. Install the package into this environment.\\n' "
      "% (_fqntrace_error,))\n");
  return 0;
}

void schedule_python_hooks() {
  auto is_initialized = reinterpret_cast<IsInitializedFn>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  auto add_pending = reinterpret_cast<PendingCallFn>(dlsym(RTLD_DEFAULT, "Py_AddPendingCall"));
  g_run_string = reinterpret_cast<RunStringFn>(dlsym(RTLD_DEFAULT, "PyRun_SimpleString"));
  if (is_initialized == nullptr || add_pending == nullptr || g_run_string == nullptr) return;
  if (is_initialized() == 0) return;
  add_pending(&activate_python_hooks, nullptr);
}

struct AutoStart {
  AutoStart() {
    try {
      ConfigResult result = config_from_environment();
      if (!result.config) {
        if (!result.problem.empty())
          log_bad_env(std::getenv("FQNTRACE"), result.problem, result.fix);
        return;
      }
      if (!result.config->note.empty()) log_line(result.config->note);
      if (!result.config->warning.empty()) log_line(result.config->warning);
      for (const std::string& warning : result.config->warnings) log_line(warning);
      std::string error;
      if (!start_session(*result.config, &error)) {
        log_bad_env(result.config->raw_value, error, "Set FQNTRACE to a writable path.");
        return;
      }
      // Children that inherit FQNTRACE learn they are children (config.h, kParentVariable).
      mark_traced_parent(static_cast<long>(::getpid()), result.config->raw_value);
      schedule_python_hooks();
    } catch (...) {
      log_line("FQNTRACE: could not start tracing (internal error); tracing is off.");
    }
  }
};

AutoStart g_autostart;

}  // namespace
}  // namespace fqntrace
