// NumPy arrays in and out of the executors' bindings (CPU and OpenCL): inputs checked and
// made contiguous, outputs allocated aligned.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "codegen/prelude/large_alloc.h"
#include "bind/numpy_tensor.h"
#include "ir/errors.h"
#include "ir/graph.h"

namespace dnnf::bind {

namespace py = pybind11;

// Every input as a C-contiguous, aligned array of its own dtype (copied only when it is not
// one already). Nothing is cast: the executor rejects a wrong dtype instead.
inline std::vector<py::array> contiguous_inputs(const Graph& g, const std::vector<ValueId>& want,
                                                const py::sequence& args) {
  if (static_cast<size_t>(py::len(args)) != want.size()) {
    std::string names;
    for (ValueId v : want) names += (names.empty() ? "" : ", ") + g.value(v).name;
    throw py::type_error("the model takes " + std::to_string(want.size()) + " input" +
                         (want.size() == 1 ? "" : "s") + " (" + names + "), got " +
                         std::to_string(py::len(args)));
  }
  std::vector<py::array> arrays;
  for (size_t i = 0; i < want.size(); ++i) {
    py::object a = args[i];
    const std::string& name = g.value(want[i]).name;
    if (!py::isinstance<py::array>(a))
      throw py::type_error("input '" + name + "' must be a numpy array, got " +
                           std::string(py::str(py::type::of(a).attr("__name__"))));
    py::array arr = a.cast<py::array>();
    try {
      dtype_of(arr.dtype());
    } catch (const DTypeError& e) {
      throw DTypeError("input '" + name + "': " + e.what());
    }
    if (arr.dtype().byteorder() == '>')
      throw DTypeError("input '" + name + "' is big-endian; convert it with .astype('<...')");
    py::array dense = py::array::ensure(arr, py::array::c_style | py::detail::npy_api::NPY_ARRAY_ALIGNED_);
    if (!dense)  // (ensure swallows NumPy's error, e.g. no memory for the contiguous copy, and returns null)
      throw Error("input '" + name + "': cannot make the contiguous copy the kernels read (" +
                  std::to_string(arr.nbytes()) + " bytes)");
    arrays.push_back(dense);
  }
  return arrays;
}

// A writable array over fresh 64-byte aligned memory (NumPy aligns to 16), freed with it.
inline py::array aligned_array(const TensorType& t) {
  std::vector<py::ssize_t> shape;
  for (int64_t d : t.dims()) shape.push_back(static_cast<py::ssize_t>(d));
  void* p = alloc_aligned(std::max<size_t>(64, t.nbytes()));  // huge pages from 2 MiB
  py::capsule owner(p, [](void* q) { std::free(q); });
  return py::array(numpy_dtype_of(t.dtype), shape, {}, p, owner);
}


}  // namespace dnnf::bind
