// fqntrace.analysis._native_summary: the CPython face of SummaryEngine (summary_engine.h).
// Plain C API, no libtorch and no pybind11: the analysis half runs where torch is not installed.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <new>

#include "analysis/engine_cpu.h"
#include "analysis/summary_engine.h"

namespace {

using fqntrace::analysis::kMemoryFields;
using fqntrace::analysis::kPhases;
using fqntrace::analysis::SummaryEngine;

struct EngineObject {
  PyObject_HEAD SummaryEngine* engine;
  bool finished;
};

int engine_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"jsonl", "step_ranges", "checks",     "live",
                                 "count", "sample",      "node_spans", nullptr};
  int jsonl = 0, checks = 0, live = 0, count = 0, node_spans = 0;
  double sample = 0;
  PyObject* ranges = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "p|Opppdp", const_cast<char**>(kwlist), &jsonl,
                                   &ranges, &checks, &live, &count, &sample, &node_spans))
    return -1;
  if (sample != 0 && !(sample > 0 && sample < 1)) {
    PyErr_SetString(PyExc_ValueError, "sample: the trace's probability, 0 < p < 1");
    return -1;
  }
  auto* obj = reinterpret_cast<EngineObject*>(self);
  delete obj->engine;
  SummaryEngine::Mode mode = checks       ? SummaryEngine::Mode::kChecks
                             : live       ? SummaryEngine::Mode::kLive
                             : count      ? SummaryEngine::Mode::kCount
                             : sample > 0 ? SummaryEngine::Mode::kSampled
                                          : SummaryEngine::Mode::kSummary;
  obj->engine = new (std::nothrow) SummaryEngine(jsonl != 0, mode);
  obj->finished = false;
  if (obj->engine == nullptr) {
    PyErr_NoMemory();
    return -1;
  }
  if (sample > 0) obj->engine->set_sample(sample, node_spans != 0);
  if (ranges == Py_None) return 0;
  PyObject* seq = PySequence_Fast(ranges, "step_ranges: a list of (pid_key, start, end, step)");
  if (seq == nullptr) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const char* key;
    Py_ssize_t key_size;
    long long start, end, step;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "s#LLL", &key, &key_size, &start, &end,
                          &step)) {
      Py_DECREF(seq);
      return -1;
    }
    obj->engine->add_step_range(std::string(key, key_size), start, end, step);
  }
  Py_DECREF(seq);
  return 0;
}

void engine_dealloc(PyObject* self) {
  delete reinterpret_cast<EngineObject*>(self)->engine;
  Py_TYPE(self)->tp_free(self);
}

// feed_block(chunk, start=0, end=len(chunk)): the lines chunk[start:end], read in place.
PyObject* feed(PyObject* self, PyObject* args, bool block) {
  auto* obj = reinterpret_cast<EngineObject*>(self);
  if (obj->finished) {
    PyErr_SetString(PyExc_RuntimeError, "the engine's result() was taken already");
    return nullptr;
  }
  PyObject* chunk;
  Py_ssize_t start = 0, end = -1;
  if (!PyArg_ParseTuple(args, "O!|nn", &PyBytes_Type, &chunk, &start, &end)) return nullptr;
  char* data = PyBytes_AS_STRING(chunk);
  Py_ssize_t length = PyBytes_GET_SIZE(chunk);
  if (end < 0 || end > length) end = length;
  if (start < 0 || start > end) start = end;
  data += start;
  Py_ssize_t size = end - start;
  long n = 0;
  bool out_of_memory = false;
  Py_BEGIN_ALLOW_THREADS  // a process pool or Dask worker may run other threads meanwhile
      try {
    n = block ? obj->engine->feed_block(data, static_cast<size_t>(size))
              : obj->engine->feed_event(data, static_cast<size_t>(size));
  } catch (...) {  // std::bad_alloc: no C++ exception crosses into Python
    out_of_memory = true;
  }
  Py_END_ALLOW_THREADS if (out_of_memory) return PyErr_NoMemory();
  return PyLong_FromLong(n);
}

PyObject* feed_block(PyObject* self, PyObject* args) { return feed(self, args, true); }
PyObject* feed_event(PyObject* self, PyObject* args) { return feed(self, args, false); }

PyObject* text(const std::string& s) {
  // surrogateescape: bytes that are not UTF-8 stay as the Python reader keeps them
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
}

// Builds the result dict; nullptr with an exception set on failure.
// [(step, fqn, phase, ns)] of the steps' self time, or of their self CPU time; nullptr: failed.
PyObject* step_list(const SummaryEngine& engine, bool cpu) {
  PyObject* list = PyList_New(0);
  if (list == nullptr) return nullptr;
  struct Ctx {
    const SummaryEngine* engine;
    PyObject* list;
    bool failed;
  } ctx{&engine, list, false};
  engine.for_each_step_time(
      [](void* raw, int64_t step, uint32_t fqn, int phase, int64_t ns) {
        auto* c = static_cast<Ctx*>(raw);
        if (c->failed) return;
        PyObject* row = Py_BuildValue("(LNiL)", (long long)step, text(c->engine->fqn(fqn)), phase,
                                      (long long)ns);
        if (row == nullptr || PyList_Append(c->list, row) < 0) c->failed = true;
        Py_XDECREF(row);
      },
      &ctx, cpu);
  if (ctx.failed) Py_CLEAR(list);
  return list;
}

PyObject* build_result(const SummaryEngine& engine) {
  PyObject* modules = PyList_New(0);
  if (modules == nullptr) return nullptr;
  for (const auto& m : engine.modules()) {
    PyObject* phases = PyList_New(kPhases);
    if (phases == nullptr) goto fail;
    for (int k = 0; k < kPhases; ++k) {
      const auto& p = m.phases[k];
      PyObject* top = PyDict_New();
      if (top == nullptr) {
        Py_DECREF(phases);
        goto fail;
      }
      for (const auto& [name, sums] : p.top) {
        PyObject* key = text(engine.name(name));
        PyObject* value = Py_BuildValue("[LL]", (long long)sums.first, (long long)sums.second);
        if (key == nullptr || value == nullptr || PyDict_SetItem(top, key, value) < 0) {
          Py_XDECREF(key);
          Py_XDECREF(value);
          Py_DECREF(top);
          Py_DECREF(phases);
          goto fail;
        }
        Py_DECREF(key);
        Py_DECREF(value);
      }
      PyObject* record =
          Py_BuildValue("(LLLLLLLNL)", (long long)p.self_ns, (long long)p.self_ops,
                        (long long)p.self_flops, (long long)p.comm_ns, (long long)p.comm_bytes,
                        (long long)p.collectives, (long long)p.device_ns, top, (long long)p.cpu_ns);
      if (record == nullptr) {
        Py_DECREF(phases);
        goto fail;
      }
      PyList_SET_ITEM(phases, k, record);
    }
    PyObject* fqn = text(engine.fqn(m.fqn));
    PyObject* type = text(m.module_type);
    PyObject* row = (fqn && type) ? Py_BuildValue("(NNLLN)", fqn, type, (long long)m.calls,
                                                  (long long)m.first_seen, phases)
                                  : nullptr;
    if (row == nullptr) {
      if (!(fqn && type)) {
        Py_XDECREF(fqn);
        Py_XDECREF(type);
        Py_DECREF(phases);
      }
      goto fail;
    }
    int rc = PyList_Append(modules, row);
    Py_DECREF(row);
    if (rc < 0) goto fail;
  }
  {
    PyObject* nodes = PyList_New(0);
    if (nodes == nullptr) goto fail;
    for (const auto& n : engine.memory_nodes()) {
      PyObject* numbers = PyList_New(kPhases);
      if (numbers == nullptr) {
        Py_DECREF(nodes);
        goto fail;
      }
      for (int k = 0; k < kPhases; ++k) {
        const int64_t* v = n.numbers[k];
        static_assert(kMemoryFields == 5, "memory.FIELDS has five numbers");
        PyList_SET_ITEM(numbers, k,
                        Py_BuildValue("[LLLLL]", (long long)v[0], (long long)v[1], (long long)v[2],
                                      (long long)v[3], (long long)v[4]));
      }
      PyObject* row =
          Py_BuildValue("(NNL)", text(engine.fqn(n.fqn)), numbers, (long long)n.live_grad);
      if (row == nullptr || PyList_Append(nodes, row) < 0) {
        Py_XDECREF(row);
        Py_DECREF(nodes);
        goto fail;
      }
      Py_DECREF(row);
    }
    PyObject* steps = step_list(engine, false);
    PyObject* step_cpu = steps != nullptr ? step_list(engine, true) : nullptr;
    if (step_cpu == nullptr) {
      Py_DECREF(nodes);
      Py_XDECREF(steps);
      goto fail;
    }
    PyObject* declared = PyDict_New();
    for (const auto& [fqn, type] : engine.declared_types()) {
      PyObject* key = declared != nullptr ? text(engine.fqn(fqn)) : nullptr;
      PyObject* value = key != nullptr ? text(engine.fqn(type)) : nullptr;
      if (value == nullptr || PyDict_SetItem(declared, key, value) < 0) Py_CLEAR(declared);
      Py_XDECREF(key);
      Py_XDECREF(value);
      if (declared == nullptr) break;
    }
    if (declared == nullptr) {
      Py_DECREF(nodes);
      Py_DECREF(steps);
      Py_DECREF(step_cpu);
      goto fail;
    }
    PyObject* variance = PyList_New(0);  // kSampled: [(fqn, phase, ns^2)]
    for (const auto& v : engine.variances()) {
      PyObject* row = variance != nullptr
                          ? Py_BuildValue("(Nid)", text(engine.fqn(v.fqn)), v.phase, v.ns2)
                          : nullptr;
      if (row == nullptr || PyList_Append(variance, row) < 0) Py_CLEAR(variance);
      Py_XDECREF(row);
      if (variance == nullptr) break;
    }
    if (variance == nullptr) {
      Py_DECREF(nodes);
      Py_DECREF(steps);
      Py_DECREF(step_cpu);
      Py_DECREF(declared);
      goto fail;
    }
    return Py_BuildValue("{sNsOsOsNsNsNsNsOsN}", "modules", modules, "device_seen",
                         engine.device_seen() ? Py_True : Py_False, "memory_seen",
                         engine.memory_seen() ? Py_True : Py_False, "memory_nodes", nodes,
                         "step_times", steps, "declared_types", declared, "step_cpu", step_cpu,
                         "cpu_seen", engine.cpu_seen() ? Py_True : Py_False, "variance", variance);
  }
fail:
  Py_DECREF(modules);
  return nullptr;
}

PyObject* result(PyObject* self, PyObject*) {
  auto* obj = reinterpret_cast<EngineObject*>(self);
  try {
    if (!obj->finished) {
      obj->engine->finish();
      obj->finished = true;
    }
    return build_result(*obj->engine);
  } catch (...) {
    return PyErr_NoMemory();
  }
}

// validate (checks=True): (threads, loose flows, fqns without a span), or None when the Python
// checks must judge the file.
PyObject* check_result(PyObject* self, PyObject* args) {
  int incomplete = 0;
  if (!PyArg_ParseTuple(args, "p", &incomplete)) return nullptr;
  auto r = reinterpret_cast<EngineObject*>(self)->engine->check_result(incomplete != 0);
  if (!r.judged) Py_RETURN_NONE;
  return Py_BuildValue("(LLL)", (long long)r.threads, (long long)r.loose_flows,
                       (long long)r.missing_fqns);
}

// repair (count=True): the "X" events among those fed.
PyObject* slices(PyObject* self, PyObject*) {
  return PyLong_FromLongLong(reinterpret_cast<EngineObject*>(self)->engine->slices());
}

// top (live=True): see summary_engine.h.
PyObject* settle(PyObject* self, PyObject*) {
  try {
    reinterpret_cast<EngineObject*>(self)->engine->settle();
  } catch (...) {
    return PyErr_NoMemory();
  }
  Py_RETURN_NONE;
}

PyObject* take_log(PyObject* self, PyObject*) {
  SummaryEngine& engine = *reinterpret_cast<EngineObject*>(self)->engine;
  std::vector<fqntrace::analysis::LiveRecord> log;
  try {
    log = engine.take_log();
  } catch (...) {
    return PyErr_NoMemory();
  }
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(log.size()));
  if (out == nullptr) return nullptr;
  for (size_t k = 0; k < log.size(); ++k) {
    const auto& r = log[k];
    PyObject* row = Py_BuildValue("(iiNLL)", int(r.kind), int(r.phase_or_annotation),
                                  text(engine.name(r.text)), (long long)r.a, (long long)r.b);
    if (row == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(k), row);
  }
  return out;
}

PyObject* live_totals(PyObject* self, PyObject*) {
  SummaryEngine& engine = *reinterpret_cast<EngineObject*>(self)->engine;
  int64_t first = 0, latest = 0;
  bool any = engine.live_span(first, latest);
  PyObject* modules = PyList_New(0);
  if (modules == nullptr) return nullptr;
  for (const auto& m : engine.modules()) {
    int64_t device_ns = m.phases[0].device_ns + m.phases[1].device_ns + m.phases[2].device_ns;
    PyObject* row = Py_BuildValue("(NLLLL)", text(engine.fqn(m.fqn)),
                                  (long long)m.phases[0].self_ns, (long long)m.phases[1].self_ns,
                                  (long long)m.phases[2].self_ns, (long long)device_ns);
    if (row == nullptr || PyList_Append(modules, row) < 0) {
      Py_XDECREF(row);
      Py_DECREF(modules);
      return nullptr;
    }
    Py_DECREF(row);
  }
  if (!any) return Py_BuildValue("(NOO)", modules, Py_None, Py_None);
  return Py_BuildValue("(NLL)", modules, (long long)first, (long long)latest);
}

PyMethodDef kEngineMethods[] = {
    {"feed_block", feed_block, METH_VARARGS,
     "feed_block(chunk, start=0, end=len(chunk)): lines of whole events (chunk[start:end], read "
     "in place): the number of events, -1 when the block is not whole "
     "events in this layout (nothing counted), -2 when a thread's events are not in end order."},
    {"feed_event", feed_event, METH_VARARGS, "One event (a JSON object, bytes): 1, -1 or -2."},
    {"result", result, METH_NOARGS,
     "Counts what is pending and returns the sums: {modules, device_seen, memory_seen, "
     "memory_nodes, step_times}."},
    {"check_result", check_result, METH_VARARGS,
     "check_result(incomplete): with checks=True, once every event is fed: (threads, loose "
     "flows, fqns without a module span), or None when the Python checks must judge the file."},
    {"slices", slices, METH_NOARGS,
     "With count=True: how many of the events fed have \"ph\": \"X\"."},
    {"settle", settle, METH_NOARGS,
     "With live=True: counts the pending ranges at depth 0 (nothing can enclose them any more)."},
    {"take_log", take_log, METH_NOARGS,
     "With live=True: [(kind, phase or is_user_annotation, fqn or name, a, b)] since the last "
     "call, in order: kind 0 counted time (when_ns, ns), 1 a ProfilerStep range (start, end)."},
    {"live_totals", live_totals, METH_NOARGS,
     "([(fqn, self ns forward, backward, recompute, device ns of all phases)], first start ns, "
     "latest end ns) so far."},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject kEngineType = {PyVarObject_HEAD_INIT(nullptr, 0) nullptr};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_native_summary",
                       "The streaming summary's per-event loop in native code (simdjson).",
                       -1,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native_summary() {
  if (!fqntrace::analysis::cpu_runs_engines()) {
    PyErr_SetString(PyExc_ImportError, "this CPU has no AVX2: the native summary is not used");
    return nullptr;
  }
  kEngineType.tp_name = "fqntrace.analysis._native_summary.Engine";
  kEngineType.tp_basicsize = sizeof(EngineObject);
  kEngineType.tp_flags = Py_TPFLAGS_DEFAULT;
  kEngineType.tp_doc =
      "Engine(jsonl, step_ranges=None, checks=False, live=False, count=False, sample=0, "
      "node_spans=False): one trace's summary sums, fed in file order (sample: a sampled "
      "trace's p, its rules).";
  kEngineType.tp_new = PyType_GenericNew;
  kEngineType.tp_init = engine_init;
  kEngineType.tp_dealloc = engine_dealloc;
  kEngineType.tp_methods = kEngineMethods;
  if (PyType_Ready(&kEngineType) < 0) return nullptr;
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  Py_INCREF(&kEngineType);
  if (PyModule_AddObject(module, "Engine", reinterpret_cast<PyObject*>(&kEngineType)) < 0) {
    Py_DECREF(&kEngineType);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
