"""Test policy: under DNNF_REQUIRE_ALL=1 (set by CI) a skipped test is a failure, so a
missing compiler, OpenCL device, onnx, onnxruntime or torch can never pass silently.

compile() measures yellow fusion pairs on the machine by default (profile="auto"), which makes
plans depend on timings and on what earlier compiles cached. The suite checks plans and counts
that must not depend on either, so it compiles with DNNF_PROFILE=off unless the caller set it;
tests/test_profiling.py tests profile="auto" explicitly, in a private cache directory.

Generated C++ modules are built at -O1 (DNNF_OPT_LEVEL=1) unless the caller set the level:
the suite compiles hundreds of them, most of CI's time was g++ optimising them (a cold
`pytest -n 2 tests/test_layout.py`: 150 s at the shipped -O3, 81 s at -O1), and what they
compute does not depend on the level (the flags never include -ffast-math; -ffp-contract=off
at every level). tests/test_compile_api.py runs at the caller's level (-O3 by default), so the
shipped build stays tested end to end. The generated-kernel tests that lower a plan themselves
(tests/codegen_runner.py, the ONNX node suite) build at -O0: small tensors, where compiling was
the cost.

PoCL builds kernels without work-group specialisation (POCL_WORK_GROUP_SPECIALIZATION=0)
unless the caller set it: see below.

Every kernel cache of the session, the tests' private ones included, shares one precompiled
header and one set of prelude units (DNNF_PRELUDE_CACHE_DIR, set below to the session's kernel
cache unless the caller set it): a private cache otherwise built its own, 6 s for the header
and 6-25 s for the units (a full run on a 2-vCPU Zen 3 left 62 header builds and 42 unit
batches in its temporary directories; sharing them took about 170 s off its 2900 s of test
time, e.g. test_profiling.py 125 -> 58 s).
Tests of how the header and units are built, found and rebuilt take a cache of their own with
the `own_prelude` fixture.

A test in whose process a prelude unit failed to compile, or a module compiled whole because it
did not compile with its units (_core.prelude_unit_problems()), fails unless it is marked
`prelude_unit_problems` (it damages units on purpose): the fallback is correct and silent, and
once hid a broken header that doubled every channels-last module's compile time (4f28d04)."""

import os

os.environ.setdefault("DNNF_PROFILE", "off")
# PoCL (the OpenCL device in CI) compiles every kernel again for each work-group size it is
# launched with unless told not to; the generic build it makes instead computes the same
# (measured cold, 2 vCPUs: ResNet-50 reduced built and first run in 23 s instead of 47 s).
os.environ.setdefault("POCL_WORK_GROUP_SPECIALIZATION", "0")
CALLER_OPT_LEVEL = os.environ.get("DNNF_OPT_LEVEL")  # None: the runtime's default, -O3
os.environ.setdefault("DNNF_OPT_LEVEL", "1")

import pytest

if not os.environ.get("DNNF_PRELUDE_CACHE_DIR"):
    try:
        from dnnfusion import _core

        os.environ["DNNF_PRELUDE_CACHE_DIR"] = _core.kernel_cache_dir()
    except Exception:  # no core or no cache: the tests themselves will say why
        pass

REQUIRE_ALL = os.environ.get("DNNF_REQUIRE_ALL") == "1"


def _fail_skip(report) -> None:
    if REQUIRE_ALL and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under DNNF_REQUIRE_ALL=1 (every dependency must be present): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip(outcome.get_result())


def pytest_report_header(config):
    """Which SIMD dialects run here and which are only compiled (tests/dialects.py)."""
    try:
        from dialects import summary
    except Exception as e:  # the core did not import: the tests themselves will say why
        return f"dnnfusion dialects: unknown ({e})"
    return summary()


@pytest.fixture(scope="module")
def ocl_device():
    """The default OpenCL device (PoCL's CPU device where there is no GPU). Without one the
    test is skipped, which DNNF_REQUIRE_ALL=1 (CI) turns into a failure."""
    import dnnfusion as df

    try:
        devices = df._core.opencl_devices()
    except df.Error as e:
        pytest.skip(f"no OpenCL device: {e}")
    return next(d for d in devices if d["selected"])


@pytest.fixture
def own_prelude(monkeypatch):
    """The precompiled header and prelude units in the test's kernel cache, as a user without
    DNNF_PRELUDE_CACHE_DIR has them (see the module docstring)."""
    monkeypatch.delenv("DNNF_PRELUDE_CACHE_DIR", raising=False)


@pytest.fixture(autouse=True)
def _prelude_units_work(request):
    """Fails the test if prelude units failed in it (see the module docstring)."""
    try:
        from dnnfusion import _core

        before = len(_core.prelude_unit_problems())
    except Exception:  # no core: the tests themselves will say why
        yield
        return
    yield
    new = _core.prelude_unit_problems()[before:]
    if new and request.node.get_closest_marker("prelude_unit_problems") is None:
        pytest.fail("prelude units failed during this test (a fault in cpp/codegen/prelude, or mark the test "
                    "prelude_unit_problems if it damages them on purpose):\n" + "\n".join(new), pytrace=False)
