// fqntrace._C: the direct binding the Python hooks call (no torch.ops dispatch, no
// record_function object): open/close a module scope by interned ids, announce a parameter's
// owner, and start/stop sessions for fqntrace.profile().
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>

#include "plugin/config.h"
#include "plugin/intern.h"
#include "plugin/observer.h"
#include "plugin/session.h"
#include "record_function/module_scope.h"

namespace {

bool arg_u32(PyObject* o, uint32_t* out) {
  unsigned long v = PyLong_AsUnsignedLong(o);
  if (v == static_cast<unsigned long>(-1) && PyErr_Occurred()) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

PyObject* py_intern(PyObject*, PyObject* arg) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(arg, &size);
  if (text == nullptr) return nullptr;
  return PyLong_FromUnsignedLong(fqntrace::intern(std::string_view(text, size)));
}

PyObject* py_module_enter(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  uint32_t fqn = 0, type = 0;
  if (nargs != 2 || !arg_u32(args[0], &fqn) || !arg_u32(args[1], &type)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "module_enter(fqn_id, type_id)");
    return nullptr;
  }
  fqntrace::module_enter(fqn, type);
  Py_RETURN_NONE;
}

// Ignores its arguments, so it also serves directly as an nn.Module forward hook
// (module, args, output): no Python frame per module call.
PyObject* py_module_exit(PyObject*, PyObject* const*, Py_ssize_t) {
  fqntrace::module_exit();
  Py_RETURN_NONE;
}

PyObject* py_accumulate_owner(PyObject*, PyObject* arg) {
  uint32_t fqn = 0;
  if (!arg_u32(arg, &fqn)) return nullptr;
  fqntrace::announce_accumulate_owner(fqn);
  Py_RETURN_NONE;
}

PyObject* py_serve_enter(PyObject*, PyObject* arg) {
  uint32_t fqn = 0;
  if (!arg_u32(arg, &fqn)) return nullptr;
  fqntrace::serve_enter(fqn);
  Py_RETURN_NONE;
}

PyObject* py_serve_exit(PyObject*, PyObject*) {
  fqntrace::serve_exit();
  Py_RETURN_NONE;
}

PyObject* py_start(PyObject*, PyObject* arg) {
  const char* value = PyUnicode_AsUTF8(arg);
  if (value == nullptr) return nullptr;
  fqntrace::ConfigResult result = fqntrace::parse_config(
      value, [](const char* name) { return std::getenv(name); }, static_cast<long>(getpid()));
  if (result.config) {
    std::string fix;
    std::string problem = fqntrace::check_path_writable(result.config->path, &fix);
    if (!problem.empty()) {
      result.config.reset();
      result.problem = problem;
      result.fix = fix;
    }
  }
  if (!result.config) {
    std::string message = result.problem.empty() ? "an empty path" : result.problem;
    PyErr_SetString(PyExc_ValueError, (std::string("fqntrace: ") + value + ": " + message +
                                       (result.fix.empty() ? "" : ". " + result.fix))
                                          .c_str());
    return nullptr;
  }
  std::string error;
  bool ok;
  Py_BEGIN_ALLOW_THREADS ok = fqntrace::start_session(*result.config, &error);
  Py_END_ALLOW_THREADS if (!ok) {
    PyErr_SetString(PyExc_RuntimeError, ("fqntrace: " + error).c_str());
    return nullptr;
  }
  return PyUnicode_FromString(result.config->path.c_str());
}

PyObject* py_stop(PyObject*, PyObject*) {
  bool ok;
  Py_BEGIN_ALLOW_THREADS ok = fqntrace::stop_session();
  Py_END_ALLOW_THREADS return PyBool_FromLong(ok);
}

PyObject* py_flush(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS fqntrace::flush_session();
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* py_set_backend(PyObject*, PyObject* arg) {
  const char* backend = PyUnicode_AsUTF8(arg);
  if (backend == nullptr) return nullptr;
  fqntrace::set_session_backend(backend);
  Py_RETURN_NONE;
}

PyObject* py_running(PyObject*, PyObject*) { return PyBool_FromLong(fqntrace::session_running()); }

PyObject* py_path(PyObject*, PyObject*) {
  return PyUnicode_FromString(fqntrace::session_path().c_str());
}

PyObject* py_current_fqn(PyObject*, PyObject*) {
  const std::string& s = fqntrace::InternTable::instance().str(fqntrace::observer::current_fqn());
  return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
}

PyMethodDef kMethods[] = {
    {"intern", py_intern, METH_O, "intern(str) -> id"},
    {"module_enter", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_enter)),
     METH_FASTCALL, "module_enter(fqn_id, type_id): open a module scope"},
    {"module_exit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_exit)),
     METH_FASTCALL, "module_exit(*ignored): close the innermost module scope (also a forward hook)"},
    {"accumulate_owner", py_accumulate_owner, METH_O,
     "the next AccumulateGrad on this thread belongs to module fqn_id"},
    {"serve_enter", py_serve_enter, METH_O,
     "serve_enter(fqn_id): what runs until serve_exit is done for module fqn_id"},
    {"serve_exit", py_serve_exit, METH_NOARGS, "close the innermost serve scope"},
    {"start", py_start, METH_O, "start(path) -> expanded path; starts a session"},
    {"stop", py_stop, METH_NOARGS, "stop the session; False if the trace could not be written"},
    {"flush", py_flush, METH_NOARGS, "drain buffers and write them to the file now"},
    {"running", py_running, METH_NOARGS, "is a session running"},
    {"set_backend", py_set_backend, METH_O, "the distributed backend, for distributedInfo"},
    {"path", py_path, METH_NOARGS, "the running session's output path"},
    {"current_fqn", py_current_fqn, METH_NOARGS, "fqn of the innermost open range on this thread"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_C", "fqntrace native binding", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&kModule); }
