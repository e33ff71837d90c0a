// Error types of the core. User mistakes get a dnnf::Error subclass (mapped to
// dnnfusion.Error subclasses in Python); broken internal invariants get InternalError.
#pragma once
#include <stdexcept>
#include <string>

namespace dnnf {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct UnsupportedOperatorError : Error { using Error::Error; };
struct ShapeError : Error { using Error::Error; };
struct DTypeError : Error { using Error::Error; };
struct ModelFormatError : Error { using Error::Error; };
struct CompileError : Error { using Error::Error; };
// A bug in dnnfusion, never the user's fault.
struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

}  // namespace dnnf
