// What fqntrace runs in Python inside a traced program stays out of the program's own Python
// profilers: torch.profiler's `with_stack=True` tracer and cProfile hear of Python calls through
// the thread's profile function (PyEval_SetProfile), so fqntrace's Python code (naming a module
// on its first call, the module- and parameter-registration hooks) runs with that function
// suspended on its thread. The callables here are objects of C types called through vectorcall:
// CPython reports C-function calls to profilers only for builtin functions, so the objects
// themselves are invisible too, and they leave no frame on the stack a profiler captures when it
// starts.
#include <cstddef>
#include <cstring>

#include "binding/methods.h"

namespace fqntrace::binding {

PyObject* call_unprofiled(PyObject* fn, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyThreadState* tstate = PyThreadState_Get();
  Py_tracefunc profile = tstate->c_profilefunc;
  if (profile == nullptr) return PyObject_Vectorcall(fn, args, nargsf, kwnames);
  PyObject* profile_obj = Py_XNewRef(tstate->c_profileobj);  // SetProfile(NULL) drops its ref
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // an audit hook may see sys.setprofile: not our error
  PyEval_SetProfile(nullptr, nullptr);
  PyErr_Restore(type, value, tb);
  PyObject* result = PyObject_Vectorcall(fn, args, nargsf, kwnames);
  PyErr_Fetch(&type, &value, &tb);  // the call's own exception passes through unchanged
  PyEval_SetProfile(profile, profile_obj);
  PyErr_Restore(type, value, tb);
  Py_XDECREF(profile_obj);
  return result;
}

namespace {

// _C.unprofiled(fn): calls fn with the profile function suspended.
// _C.around(fn, before, after, tag): calls before(), fn(*args) as usual (profiled: torch.profiler's
// start and stop functions, which fqntrace wraps), then after(), whatever fn raised. before and
// after are C callables of fqntrace's (a builtin, or functools.partial of one): called from C,
// they are reported to no profiler. Their errors are dropped: a wrapper never stands in torch's
// way. `tag` tells fqntrace's installers which wrapper it is (two wrap the same function).
struct WrapperObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* fn;
  PyObject* before;  // around: may be None
  PyObject* after;
  PyObject* tag;
};

PyObject* unprofiled_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                                PyObject* kwnames) {
  return call_unprofiled(reinterpret_cast<WrapperObject*>(self)->fn, args, nargsf, kwnames);
}

void call_quietly(PyObject* fn) {  // before / after: nothing they do reaches the caller
  if (fn == nullptr || fn == Py_None) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* result = PyObject_CallNoArgs(fn);
  Py_XDECREF(result);
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
}

PyObject* around_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                            PyObject* kwnames) {
  auto* w = reinterpret_cast<WrapperObject*>(self);
  call_quietly(w->before);
  PyObject* result = PyObject_Vectorcall(w->fn, args, nargsf, kwnames);
  call_quietly(w->after);
  return result;
}

PyObject* wrapper_wrapped(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<WrapperObject*>(self)->fn);
}

PyObject* wrapper_tag(PyObject* self, void*) {
  PyObject* tag = reinterpret_cast<WrapperObject*>(self)->tag;
  return Py_NewRef(tag != nullptr ? tag : Py_None);
}

PyObject* wrapper_getattr(PyObject* self, PyObject* name) {  // __name__, __doc__, ...: fn's
  PyObject* found = PyObject_GenericGetAttr(self, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<WrapperObject*>(self)->fn, name);
}

PyObject* wrapper_repr(PyObject* self) {
  return PyUnicode_FromFormat("<%s of %R>", Py_TYPE(self)->tp_name,
                              reinterpret_cast<WrapperObject*>(self)->fn);
}

void wrapper_dealloc(PyObject* self) {
  auto* w = reinterpret_cast<WrapperObject*>(self);
  Py_XDECREF(w->fn);
  Py_XDECREF(w->before);
  Py_XDECREF(w->after);
  Py_XDECREF(w->tag);
  Py_TYPE(self)->tp_free(self);
}

PyGetSetDef kWrapperGetSet[] = {
    {"__wrapped__", wrapper_wrapped, nullptr, "the function called", nullptr},
    {"_fqntrace_tag", wrapper_tag, nullptr, "which of fqntrace's wrappers this is", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject make_type(const char* name, const char* doc) {
  PyTypeObject t;
  std::memset(&t, 0, sizeof(t));
  Py_SET_REFCNT(reinterpret_cast<PyObject*>(&t), 1);
  t.tp_name = name;
  t.tp_basicsize = sizeof(WrapperObject);
  t.tp_dealloc = wrapper_dealloc;
  t.tp_vectorcall_offset = offsetof(WrapperObject, vectorcall);
  t.tp_repr = wrapper_repr;
  t.tp_call = PyVectorcall_Call;
  t.tp_getattro = wrapper_getattr;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  t.tp_doc = doc;
  t.tp_getset = kWrapperGetSet;
  return t;
}

PyTypeObject kUnprofiledType =
    make_type("fqntrace._C.Unprofiled", "calls its function with the profile function suspended");
PyTypeObject kAroundType =
    make_type("fqntrace._C.Around", "calls before(), its function, then after()");

PyObject* wrap(PyTypeObject* type, vectorcallfunc call, PyObject* fn, PyObject* before,
               PyObject* after, PyObject* tag) {
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "expected a callable");
    return nullptr;
  }
  if (!(type->tp_flags & Py_TPFLAGS_READY) && PyType_Ready(type) < 0) return nullptr;
  auto* w = PyObject_New(WrapperObject, type);
  if (w == nullptr) return nullptr;
  w->vectorcall = call;
  w->fn = Py_NewRef(fn);
  w->before = Py_XNewRef(before);
  w->after = Py_XNewRef(after);
  w->tag = Py_XNewRef(tag);
  return reinterpret_cast<PyObject*>(w);
}

PyObject* py_unprofiled(PyObject*, PyObject* fn) {
  return wrap(&kUnprofiledType, unprofiled_vectorcall, fn, nullptr, nullptr, nullptr);
}

PyObject* py_around(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "around(fn, before, after, tag)");
    return nullptr;
  }
  return wrap(&kAroundType, around_vectorcall, args[0], args[1], args[2], args[3]);
}

}  // namespace

void add_unprofiled_methods(std::vector<PyMethodDef>& methods) {
  methods.push_back({"unprofiled", py_unprofiled, METH_O,
                     "unprofiled(fn) -> a callable running fn unseen by Python profilers"});
  methods.push_back(
      {"around", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_around)),
       METH_FASTCALL, "around(fn, before, after, tag) -> a callable: before(), fn(...), after()"});
}

}  // namespace fqntrace::binding
