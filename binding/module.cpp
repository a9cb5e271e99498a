// The extension's entry point: one method table from every group of functions.
#include "binding/methods.h"  // first: Python.h must precede the system headers
#include "plugin/session.h"

namespace fqntrace::binding {

bool arg_u32(PyObject* o, uint32_t* out) {
  unsigned long v = PyLong_AsUnsignedLong(o);
  if (v == static_cast<unsigned long>(-1) && PyErr_Occurred()) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace fqntrace::binding

namespace {

std::vector<PyMethodDef>& methods() {
  static std::vector<PyMethodDef>* table = new std::vector<PyMethodDef>();  // lives with the module
  return *table;
}

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_C",
                       "fqntrace native binding",
                       -1,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__C() {
  std::vector<PyMethodDef>& table = methods();
  if (table.empty()) {
    fqntrace::binding::add_module_scope_methods(table);
    fqntrace::binding::add_compiled_code_methods(table);
    fqntrace::binding::add_session_methods(table);
    fqntrace::binding::add_device_methods(table);
    fqntrace::binding::add_unprofiled_methods(table);
    table.push_back({nullptr, nullptr, 0, nullptr});
  }
  kModule.m_methods = table.data();
  // This process has the Python package: it writes FQNTRACE_FORMATS=summary's summaries.
  fqntrace::register_summary_writer();
  return PyModule_Create(&kModule);
}
