// The module-scope half of fqntrace._C: what the forward hooks, the parameter hooks and the FSDP
// serve scopes call on every module call (record_function/module_ranges.h).
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

// Ignores its arguments, so it also serves directly as an nn.Module forward hook
// (module, args, output): no Python frame per module call.
PyObject* py_module_exit(PyObject*, PyObject* const*, Py_ssize_t) {
  module_exit();
  Py_RETURN_NONE;
}

PyObject* py_accumulate_owner(PyObject*, PyObject* arg) {
  uint32_t fqn = 0;
  if (!arg_u32(arg, &fqn)) return nullptr;
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

template <typename F>
PyCFunction as_cfunction(F f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

}  // namespace

void add_module_scope_methods(std::vector<PyMethodDef>& methods) {
  methods.push_back({"intern", py_intern, METH_O, "intern(str) -> id"});
  methods.push_back({"module_enter", as_cfunction(py_module_enter), METH_FASTCALL,
                     "module_enter(fqn_id, type_id): open a module scope"});
  methods.push_back({"module_exit", as_cfunction(py_module_exit), METH_FASTCALL,
                     "module_exit(*ignored): close the innermost module scope (also a forward hook)"});
  methods.push_back({"accumulate_owner", py_accumulate_owner, METH_O,
                     "the next AccumulateGrad on this thread belongs to module fqn_id"});
  methods.push_back({"serve_enter", py_serve_enter, METH_O,
                     "serve_enter(fqn_id): what runs until serve_exit is done for module fqn_id"});
  methods.push_back({"serve_exit", py_serve_exit, METH_NOARGS, "close the innermost serve scope"});
}

}  // namespace fqntrace::binding
