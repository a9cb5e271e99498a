// fqntrace._C, the CPython extension the Python package calls directly (no torch.ops dispatch,
// no record_function object). Its functions come in five groups, one file each; module.cpp puts
// them into one method table.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <vector>

namespace fqntrace::binding {

// intern, module_call, set_module_names, names_changed, set_param_owner, serve_enter/serve_exit.
void add_module_scope_methods(std::vector<PyMethodDef>& methods);
// set_region_codes, register_graph, graph_enter/graph_exit: torch.compile support.
void add_compiled_code_methods(std::vector<PyMethodDef>& methods);
// start, stop, flush, running, set_process_group: fqntrace.profile() and the package's session
// control.
void add_session_methods(std::vector<PyMethodDef>& methods);
// device_use, device_collecting, recording_target, device_events: the GPU in use and
// FQNTRACE_DEVICE's collector (device_methods.cpp).
void add_device_methods(std::vector<PyMethodDef>& methods);

// unprofiled, around: callables whose calls Python profilers never see (unprofiled_calls.cpp).
void add_unprofiled_methods(std::vector<PyMethodDef>& methods);
// fn(*args) with the thread's profile function (torch.profiler's with_stack tracer, cProfile)
// suspended: what fqntrace runs in Python inside a traced program stays out of its profiles.
PyObject* call_unprofiled(PyObject* fn, PyObject* const* args, size_t nargsf, PyObject* kwnames);

// The fqn id the module hooks registered for `module`, or 0; runs no Python code.
uint32_t known_fqn_id(PyObject* module);

// A Python int as a uint32 id; false with the Python error set.
bool arg_u32(PyObject* o, uint32_t* out);

}  // namespace fqntrace::binding
