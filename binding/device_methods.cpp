// The device half of fqntrace._C: FQNTRACE_DEVICE's collector (python/fqntrace/_device_time.py)
// asks what the running step records into and hands each recording's device events over, joined
// to their launching ops; device_use tells the tail which GPU the process initialized.
#include <cstdint>
#include <string>
#include <vector>

#include "binding/methods.h"  // first: Python.h must precede the system headers
#include "plugin/device_use.h"
#include "plugin/session.h"
#include "plugin/steps.h"

namespace fqntrace::binding {
namespace {

PyObject* py_device_use(PyObject*, PyObject* args) {
  const char* type = nullptr;
  int count = 0;
  if (!PyArg_ParseTuple(args, "zi", &type, &count)) return nullptr;
  device_use::note(type != nullptr, type != nullptr ? type : "", count);
  Py_RETURN_NONE;
}

// device_collecting(on, off): FQNTRACE_DEVICE is on; `off` (str) says why nothing is collected.
PyObject* py_device_collecting(PyObject*, PyObject* args) {
  int on = 0;
  const char* off = "";
  if (!PyArg_ParseTuple(args, "ps", &on, &off)) return nullptr;
  device_use::collecting(on != 0, off);
  Py_RETURN_NONE;
}

// recording_target() -> (main: bool, capture: int): what the running step records into.
PyObject* py_recording_target(PyObject*, PyObject*) {
  bool main = false;
  uint32_t capture = 0;
  steps::recording_target(&main, &capture);
  return Py_BuildValue("(Ok)", main ? Py_True : Py_False, static_cast<unsigned long>(capture));
}

bool text_of(PyObject* o, std::string* out) {
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(o, &n);
  if (s == nullptr) return false;
  out->assign(s, static_cast<size_t>(n));
  return true;
}

// expect_device_events(capture): Kineto records for this capture now.
PyObject* py_expect_device_events(PyObject*, PyObject* arg) {
  unsigned long capture = PyLong_AsUnsignedLong(arg);
  if (PyErr_Occurred()) return nullptr;
  expect_device_events(static_cast<uint32_t>(capture));
  Py_RETURN_NONE;
}

// One event: (cat, name, device, stream, lane, wall_ns, dur_ns, fqn, phase, correlation,
// external_id); correlation and external_id -1 when Kineto gave none.
bool event_of(PyObject* t, DeviceEvent* e) {
  PyObject *cat, *name, *fqn, *phase;
  long long stream, correlation, external;
  unsigned long long wall, dur;
  if (!PyArg_ParseTuple(t, "UUiLiKKUULL", &cat, &name, &e->device, &stream, &e->lane, &wall, &dur,
                        &fqn, &phase, &correlation, &external)) {
    return false;
  }
  e->stream = stream;
  e->wall_ns = wall;
  e->dur_ns = dur;
  e->correlation = correlation;
  e->external_id = external;
  return text_of(cat, &e->cat) && text_of(name, &e->name) && text_of(fqn, &e->fqn) &&
         text_of(phase, &e->phase);
}

// device_events(main, capture, events, not_attributed, ops, ops_joined) -> bool: a recording's
// device events and counts (DeviceUse).
PyObject* py_device_events(PyObject*, PyObject* args) {
  int main = 0;
  unsigned long capture = 0;
  PyObject* list = nullptr;
  unsigned long long not_attributed = 0, ops = 0, ops_joined = 0;
  if (!PyArg_ParseTuple(args, "pkO!KKK", &main, &capture, &PyList_Type, &list, &not_attributed,
                        &ops, &ops_joined))
    return nullptr;
  DeviceCounts counts{not_attributed, ops, ops_joined};
  std::vector<DeviceEvent> events(static_cast<size_t>(PyList_GET_SIZE(list)));
  for (size_t i = 0; i < events.size(); ++i) {
    PyObject* item = PyList_GET_ITEM(list, static_cast<Py_ssize_t>(i));
    if (!PyTuple_Check(item)) {
      PyErr_SetString(PyExc_TypeError, "device_events: each event is a tuple");
      return nullptr;
    }
    if (!event_of(item, &events[i])) return nullptr;
  }
  bool taken = false;
  Py_BEGIN_ALLOW_THREADS taken =
      add_device_events(main != 0, static_cast<uint32_t>(capture), events, counts);
  Py_END_ALLOW_THREADS return PyBool_FromLong(taken);
}

}  // namespace

void add_device_methods(std::vector<PyMethodDef>& methods) {
  methods.push_back({"device_use", py_device_use, METH_VARARGS,
                     "(type or None, count): the GPU the process initialized, for the tail"});
  methods.push_back({"device_collecting", py_device_collecting, METH_VARARGS,
                     "(on, off): FQNTRACE_DEVICE collects device activity; off: why none"});
  methods.push_back({"recording_target", py_recording_target, METH_NOARGS,
                     "(main, capture): what the running step records into"});
  methods.push_back({"expect_device_events", py_expect_device_events, METH_O,
                     "(capture): the capture's file waits for its device events"});
  methods.push_back({"device_events", py_device_events, METH_VARARGS,
                     "(main, capture, events, not_attributed, ops, ops_joined): a recording's"});
}

}  // namespace fqntrace::binding
