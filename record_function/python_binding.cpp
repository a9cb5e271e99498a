// fqntrace._C: the direct binding the Python hooks call (no torch.ops dispatch, no
// record_function object): open/close a module scope by interned ids, announce a parameter's
// owner, and start/stop sessions for fqntrace.profile().
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdio>
#include <string>
#include <vector>

#include "plugin/compiled_graph.h"
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

// --- Module names, kept by python/fqntrace/_hooks.py: the dict and set behind its weak tables
// (keys are weak references to modules; values (fqn, fqn_id, type_id)) and its naming function.
PyObject* g_names = nullptr;   // dict: weakref(module) -> (fqn, fqn_id, type_id)
PyObject* g_walked = nullptr;  // set of weakref(module): modules whose children are named
PyObject* g_name_of = nullptr;  // name_of(module) -> (fqn, fqn_id, type_id)
bool g_hook_failed = false;

PyObject* py_set_module_names(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyDict_Check(args[0]) || !PySet_Check(args[1]) || !PyCallable_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "set_module_names(dict, set, name_of)");
    return nullptr;
  }
  for (int i = 0; i < 3; ++i) Py_INCREF(args[i]);
  Py_XSETREF(g_names, args[0]);
  Py_XSETREF(g_walked, args[1]);
  Py_XSETREF(g_name_of, args[2]);
  Py_RETURN_NONE;
}

// fqn id and type id from an entry of g_names; false if it is not one.
bool ids_of(PyObject* info, uint32_t* fqn, uint32_t* type) {
  if (info == nullptr || !PyTuple_Check(info) || PyTuple_GET_SIZE(info) < 3) return false;
  return arg_u32(PyTuple_GET_ITEM(info, 1), fqn) && arg_u32(PyTuple_GET_ITEM(info, 2), type);
}

// The registered fqn id of `module` without running any Python code; 0 if it has none.
uint32_t known_fqn_id(PyObject* module) {
  if (g_names == nullptr) return 0;
  PyObject* key = PyWeakref_NewRef(module, nullptr);
  if (key == nullptr) {
    PyErr_Clear();
    return 0;
  }
  uint32_t fqn = 0, type = 0;
  if (!ids_of(PyDict_GetItemWithError(g_names, key), &fqn, &type)) fqn = 0;
  Py_DECREF(key);
  PyErr_Clear();
  return fqn;
}

// The global forward pre-hook (module, args), registered directly: no Python frame per module
// call, and Dynamo traces it as a no-op (a polyfill in _compile.py) instead of breaking the graph.
// Whatever fails here is reported once and never reaches the user's forward.
PyObject* py_module_pre_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || g_names == nullptr) {
    fqntrace::module_enter_unnamed();
    Py_RETURN_NONE;
  }
  PyObject* module = args[0];
  PyObject* key = PyWeakref_NewRef(module, nullptr);
  PyObject* owned = nullptr;
  PyObject* info = nullptr;
  if (key != nullptr) {
    info = PyDict_GetItemWithError(g_names, key);  // borrowed
    if (info == nullptr || PySet_Contains(g_walked, key) != 1) {
      owned = PyObject_CallOneArg(g_name_of, module);
      info = owned;
    }
    Py_DECREF(key);
  }
  uint32_t fqn = 0, type = 0;
  if (!PyErr_Occurred() && ids_of(info, &fqn, &type)) {
    fqntrace::module_enter(fqn, type);
  } else {
    fqntrace::module_enter_unnamed();
    if (!g_hook_failed) {
      g_hook_failed = true;
      PyObject *type_obj, *value, *tb;
      PyErr_Fetch(&type_obj, &value, &tb);
      PyObject* text = value != nullptr ? PyObject_Str(value) : nullptr;
      const char* what = text != nullptr ? PyUnicode_AsUTF8(text) : nullptr;
      std::fprintf(stderr,
                   "fqntrace: could not name a module (%s); its ops take the enclosing module's "
                   "name. Please report this with the model's code.\n",
                   what != nullptr ? what : "unexpected entry");
      Py_XDECREF(text);
      Py_XDECREF(type_obj);
      Py_XDECREF(value);
      Py_XDECREF(tb);
    }
  }
  Py_XDECREF(owned);
  PyErr_Clear();
  Py_RETURN_NONE;
}

// --- Compiled code (docs/compile.md) ---
PyObject* g_region_codes = nullptr;  // tuple of code objects whose frame's `self` is the module

// Which module does Dynamo's `Torch-Compiled Region` run? Called from the observer when such a
// range opens, on the thread that holds the GIL and evaluates the compiled frame: the nearest
// caller frame that is nn.Module._call_impl / _wrapped_call_impl names it. Reads frames only;
// runs no Python code.
uint32_t resolve_region_root() {
  if (g_region_codes == nullptr || !PyGILState_Check()) return 0;
  PyObject *err_type, *err_value, *err_tb;
  PyErr_Fetch(&err_type, &err_value, &err_tb);
  uint32_t fqn = 0;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  for (int hops = 0; frame != nullptr && hops < 8 && fqn == 0; ++hops) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    bool is_call = false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(g_region_codes); ++i) {
      if (PyTuple_GET_ITEM(g_region_codes, i) == reinterpret_cast<PyObject*>(code)) is_call = true;
    }
    Py_DECREF(code);
    if (is_call) {
      PyObject* locals = PyFrame_GetLocals(frame);
      PyObject* self = locals != nullptr && PyDict_Check(locals) ? PyDict_GetItemString(locals, "self") : nullptr;
      if (self != nullptr) fqn = known_fqn_id(self);
      Py_XDECREF(locals);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyErr_Clear();
  PyErr_Restore(err_type, err_value, err_tb);
  return fqn;
}

PyObject* py_set_region_codes(PyObject*, PyObject* arg) {
  if (!PyTuple_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "set_region_codes(tuple of code objects)");
    return nullptr;
  }
  Py_INCREF(arg);
  Py_XSETREF(g_region_codes, arg);
  fqntrace::observer::set_compiled_region_resolver(&resolve_region_root);
  Py_RETURN_NONE;
}

// register_graph(names, rel_paths) -> id: the calls a compiled graph makes, in order.
PyObject* py_register_graph(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyList_Check(args[0]) || !PyList_Check(args[1]) ||
      PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1]) || !PyUnicode_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError,
                    "register_graph(names: list[str], rel_paths: list[str], root_type: str)");
    return nullptr;
  }
  const char* root_type = PyUnicode_AsUTF8(args[2]);
  if (root_type == nullptr) return nullptr;
  std::vector<uint32_t> names;
  std::vector<std::string> paths;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(args[0]); ++i) {
    Py_ssize_t n = 0, p = 0;
    const char* name = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(args[0], i), &n);
    const char* path = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(args[1], i), &p);
    if (name == nullptr || path == nullptr) return nullptr;
    names.push_back(fqntrace::intern(std::string_view(name, n)));
    paths.emplace_back(path, p);
  }
  return PyLong_FromUnsignedLong(
      fqntrace::register_compiled_graph(std::move(names), std::move(paths), root_type));
}

PyObject* py_graph_enter(PyObject*, PyObject* arg) {
  uint32_t id = 0;
  if (!arg_u32(arg, &id)) return nullptr;
  fqntrace::observer::enter_compiled_graph(fqntrace::find_compiled_graph(id));
  Py_RETURN_NONE;
}

PyObject* py_graph_exit(PyObject*, PyObject*) {
  fqntrace::observer::exit_compiled_graph();
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
    {"module_pre_hook",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_module_pre_hook)), METH_FASTCALL,
     "module_pre_hook(module, args): nn.Module forward pre-hook that opens the module's scope"},
    {"set_module_names",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_set_module_names)), METH_FASTCALL,
     "set_module_names(dict, set, name_of): the tables module_pre_hook reads"},
    {"set_region_codes", py_set_region_codes, METH_O,
     "set_region_codes(codes): frames whose `self` is the module a compiled region runs"},
    {"register_graph",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_register_graph)), METH_FASTCALL,
     "register_graph(names, rel_paths, root_type) -> id: a compiled graph's calls in order"},
    {"graph_enter", py_graph_enter, METH_O, "graph_enter(id): compiled graph `id` starts running"},
    {"graph_exit", py_graph_exit, METH_NOARGS, "the innermost compiled graph finished"},
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
