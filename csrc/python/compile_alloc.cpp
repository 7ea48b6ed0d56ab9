// torch_fl._C._empty_strided(size, stride, dtype): the allocation call in the wrapper code torch.compile
// generates for flagos (torch_fl/compile/codegen.py), as Inductor has its own for cpu and cuda. The generic
// torch.empty_strided(..., device='flagos', dtype=...) parses keywords and goes through the dispatcher, and a
// training step's graphs make tens of allocations per call; this one reads two tuples and allocates on the
// current flagos device. Its own translation unit: the only one that needs torch's Python tensor headers.
#include <ATen/EmptyTensor.h>
#include <c10/core/Allocator.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

namespace torch_fl {
namespace {

// The ints of a tuple or list (an Inductor shape tuple); false when it is neither or holds a non-integer.
bool read_ints(PyObject* seq, c10::SmallVector<int64_t, 8>& out) {
  if (!PyTuple_Check(seq) && !PyList_Check(seq)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  out.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long v = PyLong_AsLongLong(items[i]);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    out[static_cast<size_t>(i)] = v;
  }
  return true;
}

PyObject* empty_strided(PyObject* /*module*/, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject* size = nullptr;
  PyObject* stride = nullptr;
  PyObject* dtype = nullptr;
  if (!PyArg_UnpackTuple(args, "_empty_strided", 3, 3, &size, &stride, &dtype)) return nullptr;
  c10::SmallVector<int64_t, 8> sizes;
  c10::SmallVector<int64_t, 8> strides;
  TORCH_CHECK_TYPE(read_ints(size, sizes) && read_ints(stride, strides) && THPDtype_Check(dtype),
      "torch_fl._C._empty_strided(size, stride, dtype) takes a tuple of ints for size, one for stride and a "
      "torch.dtype");
  TORCH_CHECK(sizes.size() == strides.size(), "torch_fl._C._empty_strided: size has ", sizes.size(),
      " dimensions and stride ", strides.size());
  return THPVariable_Wrap(at::detail::empty_strided_generic(sizes, strides,
      c10::GetAllocator(c10::DeviceType::PrivateUse1), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      reinterpret_cast<THPDtype*>(dtype)->scalar_type));
  END_HANDLE_TH_ERRORS
}

PyMethodDef g_empty_strided{"_empty_strided", &empty_strided, METH_VARARGS,
    "_empty_strided(size, stride, dtype): an uninitialised flagos tensor on the current flagos device."};

} // namespace

void bind_compile_alloc(py::module_& m) {
  m.add_object("_empty_strided", py::reinterpret_steal<py::object>(PyCFunction_New(&g_empty_strided, nullptr)));
}

} // namespace torch_fl
