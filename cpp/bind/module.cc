// The private extension module dnnfusion._core: one file per stage adds its bindings.
#include <pybind11/pybind11.h>

#include "ir/errors.h"

namespace py = pybind11;

void bind_ir(py::module_& m);
void bind_rewrite(py::module_& m);
void bind_plan(py::module_& m);
void bind_codegen(py::module_& m);
void bind_runtime(py::module_& m);
void bind_opencl(py::module_& m);

PYBIND11_MODULE(_core, m) {
  m.doc() = "dnnfusion C++ core (private; use the dnnfusion package)";
  // C++ errors become the Python classes of dnnfusion.errors, so users catch one hierarchy.
  py::module_ errors = py::module_::import("dnnfusion.errors");
  static py::object user_error = errors.attr("Error");
  static py::object unsupported = errors.attr("UnsupportedOperatorError");
  static py::object shape_error = errors.attr("ShapeError");
  static py::object dtype_error = errors.attr("DTypeError");
  static py::object format_error = errors.attr("ModelFormatError");
  static py::object compile_error = errors.attr("CompileError");
  static py::object internal_error = errors.attr("InternalError");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const dnnf::UnsupportedOperatorError& e) {
      PyErr_SetString(unsupported.ptr(), e.what());
    } catch (const dnnf::ShapeError& e) {
      PyErr_SetString(shape_error.ptr(), e.what());
    } catch (const dnnf::DTypeError& e) {
      PyErr_SetString(dtype_error.ptr(), e.what());
    } catch (const dnnf::ModelFormatError& e) {
      PyErr_SetString(format_error.ptr(), e.what());
    } catch (const dnnf::CompileError& e) {
      PyErr_SetString(compile_error.ptr(), e.what());
    } catch (const dnnf::Error& e) {
      PyErr_SetString(user_error.ptr(), e.what());
    } catch (const dnnf::InternalError& e) {
      PyErr_SetString(internal_error.ptr(), e.what());
    }
  });
  bind_ir(m);
  bind_rewrite(m);
  bind_plan(m);
  bind_codegen(m);
  bind_runtime(m);
  bind_opencl(m);
}
