// The session half of fqntrace._C: fqntrace.profile() starts and stops sessions; the package
// asks whether one runs, flushes it, and reports the distributed backend.
#include "binding/methods.h"  // first: Python.h must precede the system headers

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "plugin/config.h"
#include "plugin/log.h"
#include "plugin/session.h"

namespace fqntrace::binding {
namespace {

PyObject* py_start(PyObject*, PyObject* arg) {
  const char* value = PyUnicode_AsUTF8(arg);
  if (value == nullptr) return nullptr;
  ConfigResult result = config_from_value(
      value, [](const char* name) { return std::getenv(name); }, static_cast<long>(getpid()));
  if (!result.config) {
    std::string message = result.problem.empty() ? "an empty path" : result.problem;
    PyErr_SetString(PyExc_ValueError, (std::string("fqntrace: ") + value + ": " + message +
                                       (result.fix.empty() ? "" : ". " + result.fix))
                                          .c_str());
    return nullptr;
  }
  for (const std::string& warning : result.config->warnings) log_line(warning);
  std::string error;
  bool ok;
  Py_BEGIN_ALLOW_THREADS
  ok = start_session(*result.config, &error);
  Py_END_ALLOW_THREADS
  if (!ok) {
    PyErr_SetString(PyExc_RuntimeError, ("fqntrace: " + error).c_str());
    return nullptr;
  }
  return PyUnicode_FromString(result.config->path.c_str());
}

PyObject* py_stop(PyObject*, PyObject*) {
  bool ok;
  Py_BEGIN_ALLOW_THREADS
  ok = stop_session();
  Py_END_ALLOW_THREADS
  return PyBool_FromLong(ok);
}

PyObject* py_flush(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS
  flush_session();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyObject* py_set_backend(PyObject*, PyObject* arg) {
  const char* backend = PyUnicode_AsUTF8(arg);
  if (backend == nullptr) return nullptr;
  set_session_backend(backend);
  Py_RETURN_NONE;
}

PyObject* py_running(PyObject*, PyObject*) { return PyBool_FromLong(session_running()); }

}  // namespace

void add_session_methods(std::vector<PyMethodDef>& methods) {
  methods.push_back({"start", py_start, METH_O, "start(path) -> expanded path; starts a session"});
  methods.push_back({"stop", py_stop, METH_NOARGS, "stop the session; False if the trace could not be written"});
  methods.push_back({"flush", py_flush, METH_NOARGS, "drain buffers and write them to the file now"});
  methods.push_back({"running", py_running, METH_NOARGS, "is a session running"});
  methods.push_back({"set_backend", py_set_backend, METH_O, "the distributed backend, for distributedInfo"});
}

}  // namespace fqntrace::binding
