// fqntrace.analysis._native_merge: the CPython face of MergeEngine (merge_engine.h), for
// fqntrace.analysis.merge. Plain C API, no libtorch and no pybind11, like _native_summary.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <new>
#include <string>
#include <vector>

#include "analysis/engine_cpu.h"
#include "analysis/merge_engine.h"

namespace {

using fqntrace::analysis::MergeEngine;

struct MergerObject {
  PyObject_HEAD MergeEngine* engine;
  std::string* out;  // the rewritten block, reused
};

int merger_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "", const_cast<char**>(kwlist))) return -1;
  auto* obj = reinterpret_cast<MergerObject*>(self);
  delete obj->engine;
  delete obj->out;
  obj->engine = new (std::nothrow) MergeEngine();
  obj->out = new (std::nothrow) std::string();
  if (obj->engine == nullptr || obj->out == nullptr) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

void merger_dealloc(PyObject* self) {
  auto* obj = reinterpret_cast<MergerObject*>(self);
  delete obj->engine;
  delete obj->out;
  Py_TYPE(self)->tp_free(self);
}

bool ready(MergerObject* obj) {
  if (obj->engine != nullptr) return true;
  PyErr_SetString(PyExc_RuntimeError, "Merger() was not initialized");
  return false;
}

// (chunk, start, end) as the block chunk[start:end], read in place.
bool block_of(PyObject* chunk, Py_ssize_t start, Py_ssize_t end, const char** data, size_t* size) {
  Py_ssize_t length = PyBytes_GET_SIZE(chunk);
  if (end < 0 || end > length) end = length;
  if (start < 0 || start > end) start = end;
  *data = PyBytes_AS_STRING(chunk) + start;
  *size = static_cast<size_t>(end - start);
  return true;
}

// scan_block(chunk, start, end, jsonl): events read, or -1.
PyObject* scan_block(PyObject* self, PyObject* args) {
  auto* obj = reinterpret_cast<MergerObject*>(self);
  PyObject* chunk;
  Py_ssize_t start, end;
  int jsonl;
  if (!ready(obj) || !PyArg_ParseTuple(args, "O!nnp", &PyBytes_Type, &chunk, &start, &end, &jsonl))
    return nullptr;
  const char* data;
  size_t size;
  block_of(chunk, start, end, &data, &size);
  long events = 0;
  bool ok = false, out_of_memory = false;
  Py_BEGIN_ALLOW_THREADS try {
    ok = obj->engine->scan_block(data, size, jsonl != 0, &events);
  } catch (...) {  // std::bad_alloc: no C++ exception crosses into Python
    out_of_memory = true;
  }
  Py_END_ALLOW_THREADS if (out_of_memory) return PyErr_NoMemory();
  return PyLong_FromLong(ok ? events : -1);
}

PyObject* take_pids(PyObject* self, PyObject*) {
  auto* obj = reinterpret_cast<MergerObject*>(self);
  if (!ready(obj)) return nullptr;
  std::vector<std::string> pids;
  try {
    pids = obj->engine->take_pids();
  } catch (...) {
    return PyErr_NoMemory();
  }
  PyObject* list = PyList_New(0);
  if (list == nullptr) return nullptr;
  for (const auto& pid : pids) {
    // surrogateescape: bytes that are not UTF-8 stay as the Python reader keeps them
    PyObject* text =
        PyUnicode_DecodeUTF8(pid.data(), static_cast<Py_ssize_t>(pid.size()), "surrogateescape");
    if (text == nullptr || PyList_Append(list, text) < 0) {
      Py_XDECREF(text);
      Py_DECREF(list);
      return nullptr;
    }
    Py_DECREF(text);
  }
  return list;
}

PyObject* start_rank(PyObject* self, PyObject* args) {
  auto* obj = reinterpret_cast<MergerObject*>(self);
  long long rank, shift;
  int jsonl;
  if (!ready(obj) || !PyArg_ParseTuple(args, "LLp", &rank, &shift, &jsonl)) return nullptr;
  try {
    obj->engine->start_rank(rank, shift, jsonl != 0);
  } catch (...) {
    return PyErr_NoMemory();
  }
  Py_RETURN_NONE;
}

// rewrite_block(chunk, start, end): (bytes, events read, events written, slices) or None.
PyObject* rewrite_block(PyObject* self, PyObject* args) {
  auto* obj = reinterpret_cast<MergerObject*>(self);
  PyObject* chunk;
  Py_ssize_t start, end;
  if (!ready(obj) || !PyArg_ParseTuple(args, "O!nn", &PyBytes_Type, &chunk, &start, &end))
    return nullptr;
  const char* data;
  size_t size;
  block_of(chunk, start, end, &data, &size);
  long read = 0, written = 0, slices = 0;
  bool ok = false, out_of_memory = false;
  obj->out->clear();
  Py_BEGIN_ALLOW_THREADS try {
    ok = obj->engine->rewrite_block(data, size, *obj->out, &read, &written, &slices);
  } catch (...) {
    out_of_memory = true;
  }
  Py_END_ALLOW_THREADS if (out_of_memory) return PyErr_NoMemory();
  if (!ok) Py_RETURN_NONE;
  PyObject* text =
      PyBytes_FromStringAndSize(obj->out->data(), static_cast<Py_ssize_t>(obj->out->size()));
  if (text == nullptr) return nullptr;
  return Py_BuildValue("(Nlll)", text, read, written, slices);
}

PyObject* flow(PyObject* self, PyObject* args) {
  auto* obj = reinterpret_cast<MergerObject*>(self);
  const char* key;
  Py_ssize_t key_size;
  int ph;
  if (!ready(obj) || !PyArg_ParseTuple(args, "y#C", &key, &key_size, &ph)) return nullptr;
  try {
    return PyLong_FromLongLong(
        obj->engine->flow(std::string_view(key, key_size), static_cast<char>(ph)));
  } catch (...) {
    return PyErr_NoMemory();
  }
}

PyMethodDef kMergerMethods[] = {
    {"scan_block", scan_block, METH_VARARGS,
     "scan_block(chunk, start, end, jsonl): collects str(pid) of the events on the lines "
     "chunk[start:end]; the number of events, or -1 when they are not whole events it reads."},
    {"take_pids", take_pids, METH_NOARGS, "The pids collected since the last call (a list)."},
    {"start_rank", start_rank, METH_VARARGS,
     "start_rank(rank, shift_ns, jsonl): the rank whose events are rewritten next."},
    {"rewrite_block", rewrite_block, METH_VARARGS,
     "rewrite_block(chunk, start, end): (the merged events' text, each after ',\\n', events "
     "read, events written, X events), or None when a line is not one it rewrites exactly (nothing "
     "changed)."},
    {"flow", flow, METH_VARARGS,
     "flow(key, ph): the merged id of a flow end; key: the JSON texts of cat and id joined by "
     "a NUL byte."},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject kMergerType = {PyVarObject_HEAD_INIT(nullptr, 0) nullptr};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_native_merge",
                       "merge's per-line rewrite in native code (simdjson).",
                       -1,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native_merge() {
  if (!fqntrace::analysis::cpu_runs_engines()) {
    PyErr_SetString(PyExc_ImportError, "this CPU has no AVX2: the native merge is not used");
    return nullptr;
  }
  kMergerType.tp_name = "fqntrace.analysis._native_merge.Merger";
  kMergerType.tp_basicsize = sizeof(MergerObject);
  kMergerType.tp_flags = Py_TPFLAGS_DEFAULT;
  kMergerType.tp_doc = "Merger(): one merge's pids (first pass) and rewritten events (second).";
  kMergerType.tp_new = PyType_GenericNew;
  kMergerType.tp_init = merger_init;
  kMergerType.tp_dealloc = merger_dealloc;
  kMergerType.tp_methods = kMergerMethods;
  if (PyType_Ready(&kMergerType) < 0) return nullptr;
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  Py_INCREF(&kMergerType);
  if (PyModule_AddObject(module, "Merger", reinterpret_cast<PyObject*>(&kMergerType)) < 0) {
    Py_DECREF(&kMergerType);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
