// The compiled-code half of fqntrace._C (docs/compile.md): which module a Dynamo region runs,
// and the call lists of inductor's graphs with the calls that announce a graph running.
#include <string>
#include <vector>

#include "binding/methods.h"
#include "plugin/compiled_graph.h"
#include "plugin/observer.h"
#include "record_function/module_ranges.h"

namespace fqntrace::binding {
namespace {

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
      PyObject* self = locals != nullptr && PyDict_Check(locals)
                           ? PyDict_GetItemString(locals, "self")
                           : nullptr;
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
    names.push_back(intern(std::string_view(name, n)));
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

template <typename F>
PyCFunction as_cfunction(F f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

}  // namespace

void add_compiled_code_methods(std::vector<PyMethodDef>& methods) {
  methods.push_back({"set_region_codes", py_set_region_codes, METH_O,
                     "set_region_codes(codes): frames whose `self` is the module a region runs"});
  methods.push_back(
      {"register_graph", as_cfunction(py_register_graph), METH_FASTCALL,
       "register_graph(names, rel_paths, root_type) -> id: a graph's calls in order"});
  methods.push_back(
      {"graph_enter", py_graph_enter, METH_O, "graph_enter(id): graph `id` starts running"});
  methods.push_back(
      {"graph_exit", py_graph_exit, METH_NOARGS, "the innermost compiled graph finished"});
}

}  // namespace fqntrace::binding
