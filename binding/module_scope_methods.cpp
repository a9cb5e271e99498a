// The module-scope half of fqntrace._C: fqntrace's nn.Module.__call__, the naming tables it reads,
// the parameters' owners and the FSDP serve scopes (record_function/module_ranges.h).
#include <cstddef>
#include <cstdio>
#include <cstring>

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

// A parameter's kind: whether its Python object is exactly a torch.Tensor (1) or of a subclass
// (2: Parameter, UninitializedParameter until a lazy module materializes it, ...). An owner
// recorded for a parameter never answers for a plain tensor that later takes a dead parameter's
// address (a leaf input of a gradient penalty). The type is compared, not walked: the reader runs
// in backward without the GIL.
PyObject* g_plain_tensor_type = nullptr;  // torch.Tensor, held for the process

uintptr_t kind_of(const void* object) {
  if (g_plain_tensor_type == nullptr) return 0;
  auto* type =
      reinterpret_cast<PyObject*>(Py_TYPE(static_cast<PyObject*>(const_cast<void*>(object))));
  return type == g_plain_tensor_type ? 1 : 2;
}

void find_plain_tensor_type() {  // with the GIL, before the first owner is recorded
  if (g_plain_tensor_type != nullptr) return;
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* tensor = torch != nullptr ? PyObject_GetAttrString(torch, "Tensor") : nullptr;
  Py_XDECREF(torch);
  if (tensor != nullptr && PyType_Check(tensor)) {
    g_plain_tensor_type = tensor;
    set_param_kind_reader(&kind_of);
  } else {
    Py_XDECREF(tensor);
    PyErr_Clear();  // no kinds: owners answer for any object at their address, as before
  }
}

// set_param_owner(parameter, fqn_id): the module owning `parameter`, for its gradient
// accumulation. Keyed by the parameter object itself; nothing is attached to it.
PyObject* py_set_param_owner(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  uint32_t fqn = 0;
  if (nargs != 2 || !arg_u32(args[1], &fqn)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "set_param_owner(parameter, fqn_id)");
    return nullptr;
  }
  find_plain_tensor_type();
  set_param_owner(args[0], fqn, kind_of(args[0]));
  Py_RETURN_NONE;
}

// declare_module(fqn_id, type_id, parent_id): an entry of the trace's module table.
PyObject* py_declare_module(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  uint32_t ids[3] = {0, 0, 0};
  if (nargs != 3 || !arg_u32(args[0], &ids[0]) || !arg_u32(args[1], &ids[1]) ||
      !arg_u32(args[2], &ids[2])) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "declare_module(fqn_id, type_id, parent_id)");
    return nullptr;
  }
  declare_module(ids[0], ids[1], ids[2]);
  Py_RETURN_NONE;
}

PyObject* py_param_owner(PyObject*, PyObject* arg) {
  return PyLong_FromUnsignedLong(param_owner(arg, kind_of(arg)));
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
// (keys are weak references to modules; values (fqn, fqn_id, type_id, class, parent_id): the
// class the entry was made for, so a module whose class changed is named again) and its naming
// function.
PyObject* g_names = nullptr;    // dict: weakref(module) -> (fqn, fqn_id, type_id, class, parent_id)
PyObject* g_walked = nullptr;   // set of weakref(module): modules whose children are named
PyObject* g_name_of = nullptr;  // name_of(module) -> its entry
bool g_hook_failed = false;

// A direct-mapped cache in front of the tables, keyed by the module's address, so a module call
// costs a probe instead of a weak reference, a dict lookup and a set lookup. An entry keeps a
// weak reference to its module: once the module dies the reference is dead, so a new module at
// the same address never matches. Entries carry the tables' version; a rename
// (names_changed(), from _hooks.py) makes them all stale. An entry also keeps the module's class:
// a module whose class changed since (a lazy module's cls_to_become, parametrize's
// Parametrized… class, any __class__ assignment) misses, and its type is named again.
// Only touched with the GIL held.
struct CachedName {
  PyObject* module = nullptr;   // borrowed: compared, never dereferenced
  PyTypeObject* cls = nullptr;  // borrowed, compared: the module's class when cached
  PyObject* ref = nullptr;      // owned weak reference to it
  uint64_t version = 0;
  uint32_t fqn = 0;
  uint32_t type = 0;
  uint32_t name = 0;  // "nn.Module: <fqn>"
};
constexpr size_t kCachedNames = 4096;
CachedName g_cached_names[kCachedNames];
uint64_t g_names_version = 1;

CachedName& cache_slot(PyObject* module) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(module) >> 4;    // objects are 16-byte aligned
  return g_cached_names[(bits * 0x9E3779B97F4A7C15ull) >> 52];  // top 12 bits: 4096 slots
}

const CachedName* cached(PyObject* module) {
  const CachedName& slot = cache_slot(module);
  if (slot.module != module || slot.version != g_names_version || slot.cls != Py_TYPE(module) ||
      PyWeakref_GET_OBJECT(slot.ref) != module) {
    return nullptr;
  }
  return &slot;
}

void cache_ids(PyObject* module, uint32_t fqn, uint32_t type, uint32_t name) {
  PyObject* ref = PyWeakref_NewRef(module, nullptr);
  if (ref == nullptr) {
    PyErr_Clear();
    return;
  }
  CachedName& slot = cache_slot(module);
  Py_XSETREF(slot.ref, ref);
  slot.module = module;
  slot.cls = Py_TYPE(module);
  slot.version = g_names_version;
  slot.fqn = fqn;
  slot.type = type;
  slot.name = name;
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

// Whether an entry of g_names was made for the class `module` has now.
bool same_class(PyObject* info, PyObject* module) {
  return PyTuple_Check(info) && PyTuple_GET_SIZE(info) >= 4 &&
         PyTuple_GET_ITEM(info, 3) == reinterpret_cast<PyObject*>(Py_TYPE(module));
}

// fqn id and type id from an entry of g_names; false if it is not one.
bool ids_of(PyObject* info, uint32_t* fqn, uint32_t* type) {
  if (info == nullptr || !PyTuple_Check(info) || PyTuple_GET_SIZE(info) < 3) return false;
  return arg_u32(PyTuple_GET_ITEM(info, 1), fqn) && arg_u32(PyTuple_GET_ITEM(info, 2), type);
}

// Opens `module`'s scope, naming it first if needed. Whatever fails here is reported once and
// never reaches the user's forward (the module's ops then take the enclosing module's name).
ScopeOpened open_module_scope(PyObject* module) {
  if (g_names == nullptr) return ScopeOpened::kNothing;
  if (const CachedName* hit = cached(module)) return open_module(hit->fqn, hit->type, hit->name);
  PyObject* key = PyWeakref_NewRef(module, nullptr);
  PyObject* owned = nullptr;
  PyObject* info = nullptr;
  if (key != nullptr) {
    info = PyDict_GetItemWithError(g_names, key);  // borrowed
    if (info == nullptr || !same_class(info, module) || PySet_Contains(g_walked, key) != 1) {
      owned = call_unprofiled(g_name_of, &module, 1, nullptr);  // unseen by the user's profilers
      info = owned;
    }
    Py_DECREF(key);
  }
  ScopeOpened how = ScopeOpened::kNothing;
  uint32_t fqn = 0, type = 0;
  if (!PyErr_Occurred() && ids_of(info, &fqn, &type)) {
    uint32_t name = module_name_id(fqn);
    if (owned == nullptr) cache_ids(module, fqn, type, name);  // named and walked before this call
    how = open_module(fqn, type, name);
  } else if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
    // The program is at the recursion limit (a dict lookup compares keys under it): its own
    // call is about to fail the same way. Nothing to report.
  } else if (!g_hook_failed) {
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
  Py_XDECREF(owned);
  PyErr_Clear();
  return how;
}

// --- nn.Module.__call__ ----------------------------------------------------------------------
// fqntrace puts an object of this type in torch's nn.Module.__call__ (python/fqntrace/_hooks.py).
// Calling it names the module, opens its scope, runs torch's own __call__ (which finds no global
// hooks and takes its fast path) and closes the scope whether forward returned or raised.
// It is C and called through vectorcall, so it adds no frame to tracebacks or to the stack the
// recursion limit counts (a C function would: CPython counts builtin calls, not vectorcall
// objects). It binds like a function (a method descriptor: `module.__call__` is a bound method,
// `Module.__call__` is the object itself, so code that saves and restores it gets it back) and
// answers every other attribute (`__code__`, `__name__`, ...) as torch's __call__ does: for
// torch.compile, which reads them, it is torch's. Dynamo traces it as torch's __call__ (a
// polyfill, _compile.py).
struct ModuleCallObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* torch_call;  // torch's nn.Module.__call__
};

PyObject* module_call_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                                 PyObject* kwnames) {
  auto* call = reinterpret_cast<ModuleCallObject*>(self);
  if (PyVectorcall_NARGS(nargsf) < 1) {
    PyErr_SetString(PyExc_TypeError, "nn.Module.__call__ needs the module");
    return nullptr;
  }
  ScopeOpened how = open_module_scope(args[0]);
  PyObject* result = PyObject_Vectorcall(call->torch_call, args, nargsf, kwnames);
  close_module(how);  // touches no Python state: an exception from forward passes through unchanged
  return result;
}

PyObject* module_call_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyObject* module_call_getattr(PyObject* self, PyObject* name) {
  PyObject* found = PyObject_GenericGetAttr(self, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<ModuleCallObject*>(self)->torch_call, name);
}

PyObject* module_call_wrapped(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<ModuleCallObject*>(self)->torch_call);
}

PyObject* module_call_repr(PyObject* self) {
  return PyUnicode_FromFormat("<fqntrace module call of %R>",
                              reinterpret_cast<ModuleCallObject*>(self)->torch_call);
}

void module_call_dealloc(PyObject* self) {
  Py_XDECREF(reinterpret_cast<ModuleCallObject*>(self)->torch_call);
  Py_TYPE(self)->tp_free(self);
}

PyGetSetDef kModuleCallGetSet[] = {
    {"__wrapped__", module_call_wrapped, nullptr, "torch's nn.Module.__call__", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject kModuleCallType = [] {
  PyTypeObject t;
  std::memset(&t, 0, sizeof(t));
  Py_SET_REFCNT(reinterpret_cast<PyObject*>(&t), 1);
  t.tp_name = "fqntrace._C.ModuleCall";
  t.tp_basicsize = sizeof(ModuleCallObject);
  t.tp_dealloc = module_call_dealloc;
  t.tp_vectorcall_offset = offsetof(ModuleCallObject, vectorcall);
  t.tp_repr = module_call_repr;
  t.tp_call = PyVectorcall_Call;
  t.tp_getattro = module_call_getattr;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_doc = "fqntrace's nn.Module.__call__: torch's, inside the module's scope";
  t.tp_getset = kModuleCallGetSet;
  t.tp_descr_get = module_call_get;
  return t;
}();

// module_call(torch_call) -> the object fqntrace puts in nn.Module.__call__'s place.
PyObject* py_module_call(PyObject*, PyObject* arg) {
  if (!PyCallable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "module_call(torch's nn.Module.__call__)");
    return nullptr;
  }
  if (PyType_Ready(&kModuleCallType) < 0) return nullptr;
  auto* call = PyObject_New(ModuleCallObject, &kModuleCallType);
  if (call == nullptr) return nullptr;
  call->vectorcall = module_call_vectorcall;
  call->torch_call = Py_NewRef(arg);
  return reinterpret_cast<PyObject*>(call);
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
  methods.push_back({"module_call", py_module_call, METH_O,
                     "module_call(torch_call) -> fqntrace's nn.Module.__call__ around torch's"});
  methods.push_back({"names_changed", py_names_changed, METH_NOARGS,
                     "a module's name changed: module_call's cache of names is stale"});
  methods.push_back({"set_module_names", as_cfunction(py_set_module_names), METH_FASTCALL,
                     "set_module_names(dict, set, name_of): the tables module_pre_hook reads"});
  methods.push_back(
      {"set_param_owner", as_cfunction(py_set_param_owner), METH_FASTCALL,
       "set_param_owner(parameter, fqn_id): its gradient accumulation belongs to fqn_id"});
  methods.push_back({"declare_module", as_cfunction(py_declare_module), METH_FASTCALL,
                     "declare_module(fqn_id, type_id, parent_id): an entry of the module table"});
  methods.push_back({"param_owner", py_param_owner, METH_O,
                     "param_owner(parameter) -> the fqn id of its owner, 0 if none"});
  methods.push_back({"serve_enter", py_serve_enter, METH_O,
                     "serve_enter(fqn_id): what runs until serve_exit is done for module fqn_id"});
  methods.push_back({"serve_exit", py_serve_exit, METH_NOARGS, "close the innermost serve scope"});
}

}  // namespace fqntrace::binding
