// The session half of fqntrace._C: fqntrace.profile() starts and stops sessions; the package
// asks whether one runs, flushes it, and reports the distributed backend.
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "binding/methods.h"  // first: Python.h must precede the system headers
#include "plugin/config.h"
#include "plugin/log.h"
#include "plugin/observer.h"
#include "plugin/session.h"
#include "plugin/steps.h"

namespace fqntrace::binding {
namespace {

// start(path, steps=None, memory=None, sample=None, cpu=None): `steps` (FIRST:END[:PERIOD]) stands
// in for FQNTRACE_STEPS, `memory` (a bool) for FQNTRACE_MEMORY, `sample` (a str) for
// FQNTRACE_SAMPLE, `cpu` (a bool) for FQNTRACE_CPU.
PyObject* py_start(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs > 5) {
    PyErr_SetString(PyExc_TypeError, "start(path, steps=None, memory=None, sample=None, cpu=None)");
    return nullptr;
  }
  const char* value = PyUnicode_AsUTF8(args[0]);
  if (value == nullptr) return nullptr;
  const char* steps = nullptr;
  if (nargs >= 2 && args[1] != Py_None) {
    steps = PyUnicode_AsUTF8(args[1]);
    if (steps == nullptr) return nullptr;
  }
  const char* memory = nullptr;
  if (nargs >= 3 && args[2] != Py_None) {
    int on = PyObject_IsTrue(args[2]);
    if (on < 0) return nullptr;
    memory = on != 0 ? "1" : "0";
  }
  const char* sample = nullptr;
  if (nargs >= 4 && args[3] != Py_None) {
    sample = PyUnicode_AsUTF8(args[3]);
    if (sample == nullptr) return nullptr;
  }
  const char* cpu = nullptr;
  if (nargs == 5 && args[4] != Py_None) {
    int on = PyObject_IsTrue(args[4]);
    if (on < 0) return nullptr;
    cpu = on != 0 ? "1" : "0";
  }
  EnvLookup env = [steps, memory, sample, cpu](const char* name) -> const char* {
    if (steps != nullptr && std::string(name) == "FQNTRACE_STEPS") return steps;
    if (memory != nullptr && std::string(name) == "FQNTRACE_MEMORY") return memory;
    if (sample != nullptr && std::string(name) == "FQNTRACE_SAMPLE") return sample;
    if (cpu != nullptr && std::string(name) == "FQNTRACE_CPU") return cpu;
    return std::getenv(name);
  };
  ConfigResult result = config_from_value(value, env, static_cast<long>(getpid()));
  if (!result.config) {
    std::string message = result.problem.empty() ? "an empty path" : result.problem;
    PyErr_SetString(PyExc_ValueError, (std::string("fqntrace: ") + value + ": " + message +
                                       (result.fix.empty() ? "" : ". " + result.fix))
                                          .c_str());
    return nullptr;
  }
  if (!result.config->warning.empty()) {
    if (steps != nullptr) {  // an argument of the program's own: a mistake to raise
      PyErr_SetString(PyExc_ValueError,
                      ("fqntrace: steps=" +
                       result.config->warning.substr(std::string("FQNTRACE_STEPS=").size()))
                          .c_str());
      return nullptr;
    }
    log_line(result.config->warning);
  }
  for (const std::string& warning : result.config->warnings) log_line(warning);
  std::string error;
  bool ok;
  Py_BEGIN_ALLOW_THREADS ok = start_session(*result.config, &error);
  Py_END_ALLOW_THREADS if (!ok) {
    PyErr_SetString(PyExc_RuntimeError, ("fqntrace: " + error).c_str());
    return nullptr;
  }
  return PyUnicode_FromString(result.config->path.c_str());
}

PyObject* py_stop(PyObject*, PyObject*) {
  bool ok;
  Py_BEGIN_ALLOW_THREADS ok = stop_session();
  Py_END_ALLOW_THREADS return PyBool_FromLong(ok);
}

PyObject* py_flush(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS flush_session();
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* py_set_process_group(PyObject*, PyObject* args) {
  const char* backend = nullptr;
  int rank = 0, world_size = 1;
  if (!PyArg_ParseTuple(args, "sii", &backend, &rank, &world_size)) return nullptr;
  set_session_process_group(backend, rank, world_size);
  Py_RETURN_NONE;
}

// device_use(None, 0): the package watches for a GPU and none is in use yet; device_use("cuda", n):
// torch initialized CUDA with n devices. Read when a trace's tail is written.
// A step ends now (fqntrace.step()).
PyObject* py_step(PyObject*, PyObject*) {
  try {
    steps::end_step(/*at_enclosing_end=*/false);
  } catch (...) {
    // Never into the program: a step that could not end is only a missing range.
  }
  Py_RETURN_NONE;
}

// An optimizer's step ended (its global post hook, which runs inside the optimizer's
// `Optimizer.step#…` range): the step ends with that range. Ignores the hook's arguments.
PyObject* py_optimizer_step(PyObject*, PyObject* const*, Py_ssize_t) {
  try {
    steps::end_step(/*at_enclosing_end=*/true);
  } catch (...) {
  }
  Py_RETURN_NONE;
}

// capture(steps): the next `steps` steps go to a capture file (fqntrace.capture()). True when
// scheduled; False when not tracing or a capture is already under way.
PyObject* py_capture(PyObject*, PyObject* arg) {
  long long steps = PyLong_AsLongLong(arg);
  if (steps == -1 && PyErr_Occurred()) return nullptr;
  if (steps < 1) {
    PyErr_SetString(PyExc_ValueError, "fqntrace.capture: steps must be a whole number >= 1");
    return nullptr;
  }
  bool ok = false;
  try {
    std::string why;
    ok = request_capture(static_cast<uint64_t>(steps), &why);
  } catch (...) {
  }
  return PyBool_FromLong(ok);
}

// [(trace, summary path)] of the traces finished since the last call whose summary
// FQNTRACE_FORMATS=summary asked for (python/fqntrace/_summary_file.py writes them).
PyObject* py_take_summaries(PyObject*, PyObject*) {
  std::vector<SummaryDue> due = take_summaries_due();
  PyObject* out = PyList_New(0);
  for (const SummaryDue& d : due) {
    if (out == nullptr) break;
    PyObject* pair = Py_BuildValue("(ss)", d.trace.c_str(), d.summary.c_str());
    if (pair == nullptr || PyList_Append(out, pair) != 0) Py_CLEAR(out);
    Py_XDECREF(pair);
  }
  return out;
}

PyObject* py_current_step(PyObject*, PyObject*) {
  return PyLong_FromUnsignedLongLong(steps::current());
}

PyObject* py_running(PyObject*, PyObject*) { return PyBool_FromLong(session_running()); }

// torch.profiler is starting on this thread (python/fqntrace/_coexist.py).
PyObject* py_memory_yield_slot(PyObject*, PyObject*) {
  observer::yield_memory_slot();
  Py_RETURN_NONE;
}

// torch.profiler starts (True) or stops (False) recording (python/fqntrace/_kineto_hook.py).
PyObject* py_record_function_ids(PyObject*, PyObject* arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  Py_BEGIN_ALLOW_THREADS set_record_function_ids(on != 0);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

// {Record function id: (fqn, phase, module class or None)} of the ranges recorded since the
// current or last torch.profiler recording started.
PyObject* py_record_function_attribution(PyObject*, PyObject*) {
  std::vector<RangeAttribution> entries;
  Py_BEGIN_ALLOW_THREADS entries = record_function_attribution();
  Py_END_ALLOW_THREADS PyObject* out = PyDict_New();
  std::map<const std::string*, PyObject*> strs;  // one str per interned string met
  auto str = [&](const std::string* s) -> PyObject* {
    if (s == nullptr) return Py_None;
    PyObject*& o = strs[s];
    if (o == nullptr)
      o = PyUnicode_FromStringAndSize(s->data(), static_cast<Py_ssize_t>(s->size()));
    return o;
  };
  bool ok = out != nullptr;
  for (const RangeAttribution& e : entries) {
    if (!ok) break;
    PyObject* fqn = str(e.fqn);
    PyObject* type = str(e.module_type);
    PyObject* key = PyLong_FromUnsignedLongLong(e.rf_id);
    PyObject* phase = PyUnicode_FromString(e.phase);
    PyObject* value = (fqn && type && key && phase) ? PyTuple_Pack(3, fqn, phase, type) : nullptr;
    ok = value != nullptr && PyDict_SetItem(out, key, value) == 0;
    Py_XDECREF(key);
    Py_XDECREF(phase);
    Py_XDECREF(value);
  }
  for (auto& kv : strs) Py_XDECREF(kv.second);
  if (!ok) {
    Py_XDECREF(out);
    if (!PyErr_Occurred()) PyErr_NoMemory();
    return nullptr;
  }
  return out;
}

}  // namespace

void add_session_methods(std::vector<PyMethodDef>& methods) {
  methods.push_back(
      {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_start)),
       METH_FASTCALL,
       "start(path, steps=None, memory=None, sample=None, cpu=None) -> expanded path; starts a "
       "session"});
  methods.push_back({"step", py_step, METH_NOARGS, "the current training step ends"});
  methods.push_back({"optimizer_step",
                     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_optimizer_step)),
                     METH_FASTCALL, "global optimizer step post hook (optimizer, args, kwargs)"});
  methods.push_back({"current_step", py_current_step, METH_NOARGS, "number of the running step"});
  methods.push_back({"capture", py_capture, METH_O, "record the next N steps into a capture file"});
  methods.push_back(
      {"stop", py_stop, METH_NOARGS, "stop the session; False if the trace could not be written"});
  methods.push_back(
      {"flush", py_flush, METH_NOARGS, "drain buffers and write them to the file now"});
  methods.push_back(
      {"take_summaries", py_take_summaries, METH_NOARGS,
       "[(trace, summary path)] finished since the last call, for FQNTRACE_FORMATS=summary"});
  methods.push_back({"running", py_running, METH_NOARGS, "is a session running"});
  methods.push_back(
      {"set_process_group", py_set_process_group, METH_VARARGS,
       "(backend, rank, world_size) once init_process_group ran, for distributedInfo"});
  methods.push_back({"record_function_ids", py_record_function_ids, METH_O,
                     "torch.profiler starts (True) or stops (False) recording: ranges carry ids"});
  methods.push_back(
      {"record_function_attribution", py_record_function_attribution, METH_NOARGS,
       "{Record function id: (fqn, phase, module class or None)} of the last recording"});
  methods.push_back({"memory_yield_slot", py_memory_yield_slot, METH_NOARGS,
                     "torch.profiler starts on this thread: give the allocator's slot back"});
}

}  // namespace fqntrace::binding
