// The module-scope half of fqntrace._C: what the forward hooks, the parameter hooks and the FSDP
// serve scopes call on every module call (record_function/module_ranges.h).
#include <cstdio>

#include "binding/methods.h"
#include "record_function/module_ranges.h"

namespace fqntrace::binding {
namespace {

PyObject* py_intern(PyObject*, PyObject* arg) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(arg, &size);
  if (text == nullptr) return nullptr;
  return PyLong_FromUnsignedLong(intern(std::string_view(text, size)));
}

PyObject* py_module_enter(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  uint32_t fqn = 0, type = 0;
  if (nargs != 2 || !arg_u32(args[0], &fqn) || !arg_u32(args[1], &type)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "module_enter(fqn_id, type_id)");
    return nullptr;
  }
  module_enter(fqn, type);
  Py_RETURN_NONE;
}

PyObject* py_module_exit(PyObject*, PyObject*) {
  module_exit();
  Py_RETURN_NONE;
}

PyObject* py_accumulate_owner(PyObject*, PyObject* arg) {
  uint32_t fqn = 0;
  if (!arg_u32(arg, &fqn)) return nullptr;
  announce_accumulate_owner(fqn);
  Py_RETURN_NONE;
}

// A parameter's gradient hook, functools.partial(accumulate_owner_hook, fqn_id): no Python frame
// per gradient. Returns None: the gradient is unchanged.
PyObject* py_accumulate_owner_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  uint32_t fqn = 0;
  if (nargs < 1 || !arg_u32(args[0], &fqn)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "accumulate_owner_hook(fqn_id, grad)");
    return nullptr;
  }
  announce_accumulate_owner(fqn);
  Py_RETURN_NONE;
}

PyObject* py_serve_enter(PyObject*, PyObject* arg) {
  uint32_t fqn = 0;
  if (!arg_u32(arg, &fqn)) return nullptr;
  serve_enter(fqn);
  Py_RETURN_NONE;
}

PyObject* py_serve_exit(PyObject*, PyObject*) {
  serve_exit();
  Py_RETURN_NONE;
}

// --- Module names, kept by python/fqntrace/_hooks.py: the dict and set behind its weak tables
// (keys are weak references to modules; values (fqn, fqn_id, type_id)) and its naming function.
PyObject* g_names = nullptr;   // dict: weakref(module) -> (fqn, fqn_id, type_id)
PyObject* g_walked = nullptr;  // set of weakref(module): modules whose children are named
PyObject* g_name_of = nullptr;  // name_of(module) -> (fqn, fqn_id, type_id)
bool g_hook_failed = false;

// A direct-mapped cache in front of the tables, keyed by the module's address, so a module call
// costs a probe instead of a weak reference, a dict lookup and a set lookup. An entry keeps a
// weak reference to its module: once the module dies the reference is dead, so a new module at
// the same address never matches. Entries carry the tables' version; a rename
// (names_changed(), from _hooks.py) makes them all stale. Only touched with the GIL held.
struct CachedName {
  PyObject* module = nullptr;  // borrowed: compared, never dereferenced
  PyObject* ref = nullptr;     // owned weak reference to it
  uint64_t version = 0;
  uint32_t fqn = 0;
  uint32_t type = 0;
};
constexpr size_t kCachedNames = 4096;
CachedName g_cached_names[kCachedNames];
uint64_t g_names_version = 1;

CachedName& cache_slot(PyObject* module) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(module) >> 4;  // objects are 16-byte aligned
  return g_cached_names[(bits * 0x9E3779B97F4A7C15ull) >> 52];  // top 12 bits: 4096 slots
}

bool cached_ids(PyObject* module, uint32_t* fqn, uint32_t* type) {
  const CachedName& slot = cache_slot(module);
  if (slot.module != module || slot.version != g_names_version ||
      PyWeakref_GET_OBJECT(slot.ref) != module) {
    return false;
  }
  *fqn = slot.fqn;
  *type = slot.type;
  return true;
}

void cache_ids(PyObject* module, uint32_t fqn, uint32_t type) {
  PyObject* ref = PyWeakref_NewRef(module, nullptr);
  if (ref == nullptr) {
    PyErr_Clear();
    return;
  }
  CachedName& slot = cache_slot(module);
  Py_XSETREF(slot.ref, ref);
  slot.module = module;
  slot.version = g_names_version;
  slot.fqn = fqn;
  slot.type = type;
}

PyObject* py_names_changed(PyObject*, PyObject*) {
  ++g_names_version;
  Py_RETURN_NONE;
}

PyObject* py_set_module_names(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyDict_Check(args[0]) || !PySet_Check(args[1]) || !PyCallable_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "set_module_names(dict, set, name_of)");
    return nullptr;
  }
  for (int i = 0; i < 3; ++i) Py_INCREF(args[i]);
  ++g_names_version;
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

// Opens `module`'s scope, naming it first if needed. Whatever fails here is reported once and
// never reaches the user's forward (the scope is then opened unnamed: enter and exit stay paired).
void open_module_scope(PyObject* module) {
  if (g_names == nullptr) {
    module_enter_unnamed();
    return;
  }
  uint32_t fqn = 0, type = 0;
  if (cached_ids(module, &fqn, &type)) {
    module_enter(fqn, type);
    return;
  }
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
  if (!PyErr_Occurred() && ids_of(info, &fqn, &type)) {
    if (owned == nullptr) cache_ids(module, fqn, type);  // named and walked before this call
    module_enter(fqn, type);
  } else {
    module_enter_unnamed();
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
}

// --- nn.Module.__call__ ----------------------------------------------------------------------
// Global forward hooks cost every module call torch's slow path in _call_impl (a closure, the
// hook loops, the always-call bookkeeping), which outweighs the hooks themselves. Instead,
// fqntrace's nn.Module.__call__ (_hooks.py) calls module_call, which opens the scope, runs
// torch's own __call__ (which then finds no global hooks and takes its fast path), and closes the
// scope whether forward returned or raised. Dynamo inlines torch's __call__ in its place (a
// polyfill, _compile.py).
PyObject* g_torch_module_call = nullptr;  // the nn.Module.__call__ that module_call runs

PyObject* py_module_call(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (g_torch_module_call == nullptr || PyVectorcall_NARGS(nargsf) < 1) {
    PyErr_SetString(PyExc_TypeError, "module_call(module, *args, **kwargs) after set_module_call");
    return nullptr;
  }
  open_module_scope(args[0]);
  PyObject* result = PyObject_Vectorcall(g_torch_module_call, args, nargsf, kwnames);
  module_exit();  // touches no Python state: an exception from forward passes through unchanged
  return result;
}

PyObject* py_set_module_call(PyObject*, PyObject* arg) {
  if (!PyCallable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "set_module_call(torch's nn.Module.__call__)");
    return nullptr;
  }
  Py_INCREF(arg);
  Py_XSETREF(g_torch_module_call, arg);
  Py_RETURN_NONE;
}

template <typename F>
PyCFunction as_cfunction(F f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

}  // namespace

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

void add_module_scope_methods(std::vector<PyMethodDef>& methods) {
  methods.push_back({"intern", py_intern, METH_O, "intern(str) -> id"});
  methods.push_back({"module_enter", as_cfunction(py_module_enter), METH_FASTCALL,
                     "module_enter(fqn_id, type_id): open a module scope"});
  methods.push_back({"module_exit", py_module_exit, METH_NOARGS, "close the innermost module scope"});
  methods.push_back({"module_call", as_cfunction(py_module_call), METH_FASTCALL | METH_KEYWORDS,
                     "module_call(module, *args, **kwargs): nn.Module.__call__ inside a module scope"});
  methods.push_back({"set_module_call", py_set_module_call, METH_O,
                     "set_module_call(call): torch's nn.Module.__call__, which module_call runs"});
  methods.push_back({"names_changed", py_names_changed, METH_NOARGS,
                     "a module's name changed: module_call's cache of names is stale"});
  methods.push_back({"set_module_names", as_cfunction(py_set_module_names), METH_FASTCALL,
                     "set_module_names(dict, set, name_of): the tables module_pre_hook reads"});
  methods.push_back({"accumulate_owner", py_accumulate_owner, METH_O,
                     "the next AccumulateGrad on this thread belongs to module fqn_id"});
  methods.push_back({"accumulate_owner_hook", as_cfunction(py_accumulate_owner_hook), METH_FASTCALL,
                     "accumulate_owner_hook(fqn_id, grad): a parameter's tensor hook, through partial"});
  methods.push_back({"serve_enter", py_serve_enter, METH_O,
                     "serve_enter(fqn_id): what runs until serve_exit is done for module fqn_id"});
  methods.push_back({"serve_exit", py_serve_exit, METH_NOARGS, "close the innermost serve scope"});
}

}  // namespace fqntrace::binding
