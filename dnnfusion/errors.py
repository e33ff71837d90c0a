"""The exceptions dnnfusion raises.

User mistakes (a malformed model, an unsupported operator, a wrong shape or dtype, a
failed compile) raise a subclass of :class:`Error` whose message names the node, the
operator and what was expected. :class:`InternalError` is a bug in dnnfusion and is
deliberately *not* a subclass of :class:`Error`.
"""


class Error(Exception):
    """Base class of every error caused by the model or the caller."""


class UnsupportedOperatorError(Error):
    """An operator (or an attribute value of one) that dnnfusion does not implement."""


class ShapeError(Error):
    """Shapes that do not fit an operator, or inputs of the wrong shape at call time."""


class DTypeError(Error):
    """An element type dnnfusion does not support, or inputs of the wrong dtype."""


class ModelFormatError(Error):
    """A malformed, truncated or invalid model file, graph or ECG text."""


class CompileError(Error):
    """Generated code failed to compile, or no compiler/device is available."""


class ModelWarning(UserWarning):
    """A model that the ONNX checker faults but ONNX Runtime runs (e.g. a graph output whose
    type has no shape): dnnfusion imports it too, and says what the checker found."""


class CompileWarning(UserWarning):
    """A compile that succeeded the slow way: the C++ compiler rejected a prelude unit, or a
    module did not compile with its prelude units and was compiled whole (a unit object damaged
    on disk, or a fault in dnnfusion's prelude: please report it). The results are correct; the
    compile took longer. ``stats["prelude_units"]`` says what was named, linked and why."""


class InternalError(RuntimeError):
    """A broken invariant inside dnnfusion: please report it."""
