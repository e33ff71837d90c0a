// NumPy arrays <-> core tensors and attributes, shared by the binding files: constants
// wrap the array's memory without copying, and arrays view the tensor's memory.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "ir/attr.h"
#include "ir/errors.h"

namespace dnnf {

namespace py = pybind11;

inline const char* numpy_name(DType t) {
  switch (t) {
    case DType::F16: return "float16"; case DType::F32: return "float32";
    case DType::BF16: return "bfloat16";
    case DType::F64: return "float64"; case DType::I8: return "int8";
    case DType::I16: return "int16"; case DType::I32: return "int32";
    case DType::I64: return "int64"; case DType::U8: return "uint8";
    case DType::U16: return "uint16"; case DType::U32: return "uint32";
    case DType::U64: return "uint64"; case DType::Bool: return "bool";
    case DType::I4: return "int4"; case DType::U4: return "uint4";
    case DType::I2: return "int2"; case DType::U2: return "uint2";
    case DType::F8E4M3FN: return "float8_e4m3fn"; case DType::F8E4M3FNUZ: return "float8_e4m3fnuz";
    case DType::F8E5M2: return "float8_e5m2"; case DType::F8E5M2FNUZ: return "float8_e5m2fnuz";
    case DType::F4E2M1: return "float4_e2m1fn"; case DType::F8E8M0: return "float8_e8m0fnu";
    case DType::F6E2M3: return "float6_e2m3fn"; case DType::F6E3M2: return "float6_e3m2fn";
  }
  return "float32";
}

inline DType dtype_of(const py::dtype& dt) {
  char kind = dt.kind();
  auto size = dt.itemsize();
  if (kind == 'f' && size == 2) return DType::F16;
  if (kind == 'V' && size == 2 && std::string(py::str(dt)) == "bfloat16") return DType::BF16;  // ml_dtypes
  if (kind == 'f' && size == 4) return DType::F32;
  if (kind == 'f' && size == 8) return DType::F64;
  if (kind == 'i' && size == 1) return DType::I8;
  if (kind == 'i' && size == 2) return DType::I16;
  if (kind == 'i' && size == 4) return DType::I32;
  if (kind == 'i' && size == 8) return DType::I64;
  if (kind == 'u' && size == 1) return DType::U8;
  if (kind == 'u' && size == 2) return DType::U16;
  if (kind == 'u' && size == 4) return DType::U32;
  if (kind == 'u' && size == 8) return DType::U64;
  if (kind == 'b') return DType::Bool;
  if ((kind == 'V' || kind == 'f') && size == 1) {  // ml_dtypes' one-byte types (float8_e5m2's kind is 'f')
    const std::string n = py::str(dt);
#define X(name, text, size, onnx) \
    if ((is_narrow(DType::name) || is_small_float(DType::name)) && n == numpy_name(DType::name)) return DType::name;
    DNNF_FOR_EACH_DTYPE(X)
#undef X
  }
  throw DTypeError("unsupported element type " + std::string(py::str(dt)) +
                   "; dnnfusion supports f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool and, as ml_dtypes' types, "
                   "bfloat16 int4 uint4 int2 uint2 float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz "
                   "float8_e8m0fnu float6_e2m3fn float6_e3m2fn float4_e2m1fn");
}


// The NumPy dtype of t; bfloat16 is ml_dtypes' (imported here, so that NumPy knows the name).
// The narrow integers are ml_dtypes' types by object: NumPy reads the names "int4", "uint4",
// "int2" and "uint2" as int32, uint32, int16 and uint16.
inline py::dtype numpy_dtype_of(DType t) {
  if (t == DType::BF16 || is_narrow(t) || is_small_float(t)) {
    py::module_ ml;
    try {
      ml = py::module_::import("ml_dtypes");
    } catch (py::error_already_set&) {
      throw DTypeError(std::string(dtype_name(t)) + " arrays need the 'ml_dtypes' package (pip install ml_dtypes)");
    }
    if (t != DType::BF16) return py::dtype::from_args(ml.attr(numpy_name(t)));
  }
  return py::dtype(numpy_name(t));
}

// Wraps a NumPy array without copying when it is C-contiguous and aligned; the array
// stays alive as long as any graph references the constant.
inline TensorPtr tensor_from_array(const py::array& arr_in) {
  DType dt = dtype_of(arr_in.dtype());
  if (arr_in.dtype().byteorder() == '>')
    throw DTypeError("big-endian arrays are not supported; convert with .astype('<...')");
  py::array arr = arr_in;
  if (!(arr.flags() & py::array::c_style) || !(arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
    arr = py::array::ensure(arr_in, py::array::c_style | py::array::forcecast);
  if (!arr)  // (ensure swallows NumPy's error, e.g. no memory for the contiguous copy, and returns null)
    throw Error("cannot make a contiguous copy of an array of " + std::to_string(arr_in.nbytes()) + " bytes");
  auto t = std::make_shared<TensorData>();
  t->type.dtype = dt;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) t->type.shape.push_back(Dim(arr.shape(i)));
  t->data = arr.data();
  auto* keep = new py::object(arr);
  t->owner = std::shared_ptr<const void>(arr.data(), [keep](const void*) {
    py::gil_scoped_acquire gil;
    delete keep;
  });
  return t;
}

inline py::array array_from_tensor(const TensorPtr& t) {
  std::vector<py::ssize_t> shape;
  for (const Dim& d : t->type.shape) shape.push_back(d.value);
  // The capsule keeps the tensor (and so the memory) alive while NumPy views it.
  auto* hold = new TensorPtr(t);
  py::capsule base(hold, [](void* p) { delete static_cast<TensorPtr*>(p); });
  py::array a(numpy_dtype_of(t->type.dtype), shape, {}, t->data, base);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

inline py::object attr_to_py(const Attr& a) {
  switch (a.kind) {
    case Attr::Kind::Int: return py::int_(a.i);
    case Attr::Kind::Float: return py::float_(a.f);
    case Attr::Kind::String: return py::str(a.s);
    case Attr::Kind::Ints: return py::cast(a.ints);
    case Attr::Kind::Floats: return py::cast(a.floats);
    case Attr::Kind::Strings: return py::cast(a.strings);
    case Attr::Kind::Tensor: return array_from_tensor(a.t);
  }
  return py::none();
}

}  // namespace dnnf
