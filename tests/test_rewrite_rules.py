"""The rewrite passes of paper §4.2, rule by rule: for every algebraic rule a before/after
pair in ECG text, a case where it must not fire, and the reference interpreter's values
before and after; constant folding; Conv/Gemm + BatchNormalization folding (also against
PyTorch); the Python pipeline and its report."""

from __future__ import annotations

import re
import importlib
from dataclasses import dataclass

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

# The module, even if the package re-exports the function `rewrite` under the same name.
rw = importlib.import_module("dnnfusion.rewrite")

XYZ = "%x: f32[4,8], %y: f32[4,8], %z: f32[4,8]"


@dataclass
class Case:
    before: str           # graph body (nodes and return) over `inputs`
    after: str            # expected body after apply_algebraic_rules (node names ignored)
    negative: str         # a body where the rule must not fire, and why in `why`
    why: str
    inputs: str = XYZ
    positive: bool = False  # feed positive inputs (domains of Log/Sqrt)


# One entry per rule of cpp/rewrite/algebra.cc; test_every_rule_has_a_case enforces it.
CASES: dict[str, Case] = {
    # ---- operators that compute nothing --------------------------------------------------
    "mul_one": Case(
        "%one: f32[] = const [1.0]\n%r: f32[4,8] = Mul(%one, %x)\nreturn %r",
        "return %x",
        "%one: f32[3,1,1] = const [1.0, 1.0, 1.0]\n%r: f32[3,4,8] = Mul(%x, %one)\nreturn %r",
        "the ones broadcast x to a larger shape"),
    "div_one": Case(
        "%one: f32[] = const [1.0]\n%r: f32[4,8] = Div(%x, %one)\nreturn %r",
        "return %x",
        "%one: f32[] = const [1.0]\n%r: f32[4,8] = Div(%one, %x)\nreturn %r",
        "1/x is not x (Div does not commute)"),
    "add_zero": Case(
        "%zero: f32[1] = const [0.0]\n%r: f32[4,8] = Add(%x, %zero)\nreturn %r",
        "return %x",
        "%zero: f32[3,1,1] = const [0.0, 0.0, 0.0]\n%r: f32[3,4,8] = Add(%zero, %x)\nreturn %r",
        "the zeros broadcast x to a larger shape"),
    "sub_zero": Case(
        "%zero: f32[] = const [0.0]\n%r: f32[4,8] = Sub(%x, %zero)\nreturn %r",
        "return %x",
        "%zero: f32[] = const [0.0]\n%r: f32[4,8] = Sub(%zero, %x)\nreturn %r",
        "0 - x is not x"),
    "pow_one": Case(
        "%one: f32[] = const [1.0]\n%r: f32[4,8] = Pow(%x, %one)\nreturn %r",
        "return %x",
        "%one: f32[3,1,1] = const [1.0, 1.0, 1.0]\n%r: f32[3,4,8] = Pow(%x, %one)\nreturn %r",
        "the exponent broadcasts x"),
    "neg_neg": Case(
        "%n: f32[4,8] = Neg(%x)\n%r: f32[4,8] = Neg(%n)\nreturn %r",
        "return %x",
        "%n: f32[4,8] = Neg(%x)\n%r: f32[4,8] = Neg(%n)\nreturn %r, %n",
        "the inner Neg is also a graph output"),
    "recip_recip": Case(
        "%n: f32[4,8] = Reciprocal(%x)\n%r: f32[4,8] = Reciprocal(%n)\nreturn %r",
        "return %x",
        "%n: f32[4,8] = Reciprocal(%x)\n%r: f32[4,8] = Reciprocal(%n)\n"
        "%s: f32[4,8] = Add(%n, %y)\nreturn %r, %s",
        "the inner Reciprocal has a second consumer"),
    "abs_abs": Case(
        "%n: f32[4,8] = Abs(%x)\n%r: f32[4,8] = Abs(%n)\nreturn %r",
        "%r: f32[4,8] = Abs(%x)\nreturn %r",
        "%n: f32[4,8] = Abs(%x)\n%r: f32[4,8] = Abs(%n)\nreturn %r, %n",
        "the inner Abs is also a graph output"),
    "abs_neg": Case(
        "%n: f32[4,8] = Neg(%x)\n%r: f32[4,8] = Abs(%n)\nreturn %r",
        "%r: f32[4,8] = Abs(%x)\nreturn %r",
        "%n: f32[4,8] = Neg(%x)\n%r: f32[4,8] = Abs(%n)\nreturn %r, %n",
        "the Neg is also a graph output"),
    "relu_relu": Case(
        "%n: f32[4,8] = Relu(%x)\n%r: f32[4,8] = Relu(%n)\nreturn %r",
        "%r: f32[4,8] = Relu(%x)\nreturn %r",
        "%n: f32[4,8] = Relu(%x)\n%r: f32[4,8] = Relu(%n)\nreturn %r, %n",
        "the inner Relu is also a graph output"),
    # ---- strength reduction -----------------------------------------------------------
    "pow_two": Case(
        "%two: f32[] = const [2.0]\n%r: f32[4,8] = Pow(%x, %two)\nreturn %r",
        "%r: f32[4,8] = Mul(%x, %x)\nreturn %r",
        "%two: f32[3,1,1] = const [2.0, 2.0, 2.0]\n%r: f32[3,4,8] = Pow(%x, %two)\nreturn %r",
        "x*x would have x's shape, not the broadcast one"),
    "pow_minus_one": Case(
        "%e: f32[] = const [-1.0]\n%r: f32[4,8] = Pow(%x, %e)\nreturn %r",
        "%r: f32[4,8] = Reciprocal(%x)\nreturn %r",
        "%e: f32[] = const [-2.0]\n%r: f32[4,8] = Pow(%x, %e)\nreturn %r",
        "the exponent is not -1"),
    "pow_half": Case(
        "%h: f32[] = const [0.5]\n%p: f32[4,8] = Relu(%x)\n%r: f32[4,8] = Pow(%p, %h)\nreturn %r",
        "%p: f32[4,8] = Relu(%x)\n%r: f32[4,8] = Sqrt(%p)\nreturn %r",
        "%h: f32[] = const [0.5]\n%r: f32[4,8] = Pow(%x, %h)\nreturn %r",
        "x may be negative (pow and sqrt differ at -0 and -inf)"),
    "div_to_mul": Case(
        "%c: f32[] = const [4.0]\n%r: f32[4,8] = Div(%x, %c)\nreturn %r",
        "%r.c: f32[] = const [0.25]\n%r: f32[4,8] = Mul(%x, %r.c)\nreturn %r",
        "%r: f32[4,8] = Div(%x, %y)\nreturn %r",
        "1/y is as large as x: a Reciprocal and a Mul cost more than the Div"),
    "mul_recip_to_div": Case(
        "%n: f32[4,8] = Reciprocal(%y)\n%r: f32[4,8] = Mul(%x, %n)\nreturn %r",
        "%r: f32[4,8] = Div(%x, %y)\nreturn %r",
        "%n: f32[4,1] = Reciprocal(%s)\n%r: f32[4,8] = Mul(%x, %n)\nreturn %r",
        "the reciprocal of the small s is cheaper than dividing every element",
        inputs="%x: f32[4,8], %y: f32[4,8], %s: f32[4,1]"),
    "div_recip": Case(
        "%n: f32[4,8] = Reciprocal(%y)\n%r: f32[4,8] = Div(%x, %n)\nreturn %r",
        "%r: f32[4,8] = Mul(%x, %y)\nreturn %r",
        "%n: f32[4,8] = Reciprocal(%y)\n%r: f32[4,8] = Div(%x, %n)\nreturn %r, %n",
        "the Reciprocal is also a graph output"),
    "sqrt_square": Case(
        "%m: f32[4,8] = Mul(%x, %x)\n%r: f32[4,8] = Sqrt(%m)\nreturn %r",
        "%r: f32[4,8] = Abs(%x)\nreturn %r",
        "%m: f32[4,8] = Mul(%x, %y)\n%r: f32[4,8] = Sqrt(%m)\nreturn %r",
        "x*y is not a square"),
    # ---- signs -------------------------------------------------------------------------
    "sub_neg": Case(
        "%n: f32[4,8] = Neg(%y)\n%r: f32[4,8] = Sub(%x, %n)\nreturn %r",
        "%r: f32[4,8] = Add(%x, %y)\nreturn %r",
        "%n: f32[4,8] = Neg(%y)\n%r: f32[4,8] = Sub(%n, %x)\nreturn %r",
        "(-y) - x has no Neg to absorb (Sub does not commute)"),
    "add_neg": Case(
        "%n: f32[4,8] = Neg(%y)\n%r: f32[4,8] = Add(%n, %x)\nreturn %r",
        "%r: f32[4,8] = Sub(%x, %y)\nreturn %r",
        "%n: f32[4,8] = Neg(%y)\n%r: f32[4,8] = Add(%n, %x)\nreturn %r, %n",
        "the Neg is also a graph output"),
    "neg_sub": Case(
        "%d: f32[4,8] = Sub(%x, %y)\n%r: f32[4,8] = Neg(%d)\nreturn %r",
        "%r: f32[4,8] = Sub(%y, %x)\nreturn %r",
        "%d: f32[4,8] = Sub(%x, %y)\n%r: f32[4,8] = Neg(%d)\nreturn %r, %d",
        "the Sub is also a graph output"),
    "mul_neg_neg": Case(
        "%a: f32[4,8] = Neg(%x)\n%b: f32[4,8] = Neg(%y)\n%r: f32[4,8] = Mul(%a, %b)\nreturn %r",
        "%r: f32[4,8] = Mul(%x, %y)\nreturn %r",
        "%a: f32[4,8] = Neg(%x)\n%b: f32[4,8] = Neg(%y)\n%r: f32[4,8] = Mul(%a, %b)\n"
        "%s: f32[4,8] = Add(%b, %z)\nreturn %r, %s",
        "one Neg has a second consumer"),
    "neg_mul_const": Case(
        "%c: f32[8] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n"
        "%m: f32[4,8] = Mul(%x, %c)\n%r: f32[4,8] = Neg(%m)\nreturn %r",
        "%r.c: f32[8] = const [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0]\n"
        "%r: f32[4,8] = Mul(%x, %r.c)\nreturn %r",
        "%m: f32[4,8] = Mul(%x, %y)\n%r: f32[4,8] = Neg(%m)\nreturn %r",
        "y is not a constant: -(x*y) costs what x*(-y) costs"),
    "mul_neg_const": Case(
        "%c: f32[] = const [3.0]\n%n: f32[4,8] = Neg(%x)\n%r: f32[4,8] = Mul(%c, %n)\nreturn %r",
        "%r.c: f32[] = const [-3.0]\n%r: f32[4,8] = Mul(%x, %r.c)\nreturn %r",
        "%n: f32[4,8] = Neg(%x)\n%r: f32[4,8] = Mul(%n, %y)\nreturn %r",
        "y is not a constant"),
    # ---- associativity with constants ------------------------------------------------
    "mul_mul_const": Case(
        "%a: f32[] = const [2.0]\n%b: f32[] = const [3.0]\n"
        "%m: f32[4,8] = Mul(%x, %a)\n%r: f32[4,8] = Mul(%b, %m)\nreturn %r",
        "%r.c: f32[] = const [6.0]\n%r: f32[4,8] = Mul(%x, %r.c)\nreturn %r",
        "%a: f32[] = const [2.0]\n%b: f32[] = const [3.0]\n"
        "%m: f32[4,8] = Mul(%x, %a)\n%r: f32[4,8] = Mul(%b, %m)\nreturn %r, %m",
        "the inner product is also a graph output"),
    "const_div_mul_const": Case(
        "%a: f32[] = const [2.0]\n%b: f32[] = const [3.0]\n"
        "%d: f32[4,8] = Div(%a, %x)\n%r: f32[4,8] = Mul(%d, %b)\nreturn %r",
        "%r.c: f32[] = const [6.0]\n%r: f32[4,8] = Div(%r.c, %x)\nreturn %r",
        "%a: f32[] = const [2.0]\n%b: f32[] = const [3.0]\n"
        "%d: f32[4,8] = Div(%a, %x)\n%r: f32[4,8] = Mul(%d, %b)\nreturn %r, %d",
        "the quotient is also a graph output"),
    "const_div_mul": Case(
        "%a: f32[] = const [6.0]\n%b: f32[] = const [2.0]\n"
        "%m: f32[4,8] = Mul(%x, %b)\n%r: f32[4,8] = Div(%a, %m)\nreturn %r",
        "%r.c: f32[] = const [3.0]\n%r: f32[4,8] = Div(%r.c, %x)\nreturn %r",
        "%a: f32[] = const [6.0]\n%m: f32[4,8] = Mul(%x, %y)\n%r: f32[4,8] = Div(%a, %m)\nreturn %r",
        "y is not a constant"),
    "add_add_const": Case(
        "%a: f32[] = const [2.0]\n%b: f32[8] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n"
        "%s: f32[4,8] = Add(%a, %x)\n%r: f32[4,8] = Add(%s, %b)\nreturn %r",
        "%r.c: f32[8] = const [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]\n"
        "%r: f32[4,8] = Add(%x, %r.c)\nreturn %r",
        "%a: f32[] = const [2.0]\n%s: f32[4,8] = Add(%a, %x)\n%r: f32[4,8] = Add(%s, %y)\nreturn %r",
        "y is not a constant"),
    "add_sub_const": Case(
        "%a: f32[] = const [2.0]\n%b: f32[] = const [5.0]\n"
        "%s: f32[4,8] = Sub(%x, %a)\n%r: f32[4,8] = Add(%s, %b)\nreturn %r",
        "%r.c: f32[] = const [3.0]\n%r: f32[4,8] = Add(%x, %r.c)\nreturn %r",
        "%a: f32[] = const [2.0]\n%b: f32[] = const [5.0]\n"
        "%s: f32[4,8] = Sub(%a, %x)\n%r: f32[4,8] = Add(%s, %b)\nreturn %r",
        "(c1 - x) + c2 is not of the form (x - c1) + c2"),
    "sub_add_const": Case(
        "%a: f32[] = const [2.0]\n%b: f32[] = const [5.0]\n"
        "%s: f32[4,8] = Add(%x, %a)\n%r: f32[4,8] = Sub(%s, %b)\nreturn %r",
        "%r.c: f32[] = const [-3.0]\n%r: f32[4,8] = Add(%x, %r.c)\nreturn %r",
        "%a: f32[] = const [2.0]\n%b: f32[] = const [5.0]\n"
        "%s: f32[4,8] = Add(%x, %a)\n%r: f32[4,8] = Sub(%b, %s)\nreturn %r",
        "c2 - (x + c1) is not of the form (x + c1) - c2"),
    "sub_sub_const": Case(
        "%a: f32[] = const [2.0]\n%b: f32[] = const [5.0]\n"
        "%s: f32[4,8] = Sub(%x, %a)\n%r: f32[4,8] = Sub(%s, %b)\nreturn %r",
        "%r.c: f32[] = const [7.0]\n%r: f32[4,8] = Sub(%x, %r.c)\nreturn %r",
        "%a: f32[] = const [2.0]\n%b: f32[] = const [5.0]\n"
        "%s: f32[4,8] = Sub(%x, %a)\n%r: f32[4,8] = Sub(%s, %b)\nreturn %r, %s",
        "the inner difference is also a graph output"),
    # ---- associativity: divisions, reciprocals, like functions ------------------------
    "div_div": Case(
        "%d: f32[4,8] = Div(%x, %y)\n%r: f32[4,8] = Div(%d, %z)\nreturn %r",
        "%r.mul: f32[4,8] = Mul(%y, %z)\n%r: f32[4,8] = Div(%x, %r.mul)\nreturn %r",
        "%d: f32[4,8] = Div(%x, %y)\n%r: f32[4,8] = Div(%d, %z)\nreturn %r, %d",
        "the inner quotient is also a graph output"),
    "div_of_div": Case(
        "%d: f32[4,8] = Div(%y, %z)\n%r: f32[4,8] = Div(%x, %d)\nreturn %r",
        "%r.mul: f32[4,8] = Mul(%x, %z)\n%r: f32[4,8] = Div(%r.mul, %y)\nreturn %r",
        "%d: f32[4,8] = Div(%y, %z)\n%r: f32[4,8] = Div(%x, %d)\nreturn %r, %d",
        "the inner quotient is also a graph output"),
    "recip_mul_recip": Case(
        "%a: f32[4,8] = Reciprocal(%x)\n%b: f32[4,8] = Reciprocal(%y)\n"
        "%r: f32[4,8] = Mul(%a, %b)\nreturn %r",
        "%r.mul: f32[4,8] = Mul(%x, %y)\n%r: f32[4,8] = Reciprocal(%r.mul)\nreturn %r",
        "%a: f32[4,8] = Reciprocal(%x)\n%b: f32[4,8] = Reciprocal(%y)\n"
        "%r: f32[4,8] = Mul(%a, %b)\nreturn %r, %b",
        "one Reciprocal is also a graph output"),
    "recip_div": Case(
        "%a: f32[4,8] = Reciprocal(%x)\n%r: f32[4,8] = Div(%a, %y)\nreturn %r",
        "%r.mul: f32[4,8] = Mul(%x, %y)\n%r: f32[4,8] = Reciprocal(%r.mul)\nreturn %r",
        "%a: f32[4,8] = Reciprocal(%x)\n%r: f32[4,8] = Div(%y, %a)\n%s: f32[4,8] = Add(%a, %z)\n"
        "return %r, %s",
        "y / (1/x) with the Reciprocal used again: neither div rule may drop it"),
    "abs_mul_abs": Case(
        "%a: f32[4,8] = Abs(%x)\n%b: f32[4,8] = Abs(%y)\n%r: f32[4,8] = Mul(%a, %b)\nreturn %r",
        "%r.mul: f32[4,8] = Mul(%x, %y)\n%r: f32[4,8] = Abs(%r.mul)\nreturn %r",
        "%a: f32[4,8] = Abs(%x)\n%b: f32[4,8] = Abs(%y)\n%r: f32[4,8] = Mul(%a, %b)\nreturn %r, %a",
        "|x| is also a graph output"),
    "exp_mul_exp": Case(
        "%a: f32[4,8] = Exp(%x)\n%b: f32[4,8] = Exp(%y)\n%r: f32[4,8] = Mul(%a, %b)\nreturn %r",
        "%r.add: f32[4,8] = Add(%x, %y)\n%r: f32[4,8] = Exp(%r.add)\nreturn %r",
        "%a: f32[4,8] = Exp(%x)\n%b: f32[4,8] = Exp(%y)\n%r: f32[4,8] = Mul(%a, %b)\nreturn %r, %a",
        "one Exp is also a graph output"),
    "exp_div_exp": Case(
        "%a: f32[4,8] = Exp(%x)\n%b: f32[4,8] = Exp(%y)\n%r: f32[4,8] = Div(%a, %b)\nreturn %r",
        "%r.sub: f32[4,8] = Sub(%x, %y)\n%r: f32[4,8] = Exp(%r.sub)\nreturn %r",
        "%a: f32[4,8] = Exp(%x)\n%b: f32[4,8] = Exp(%y)\n%r: f32[4,8] = Div(%a, %b)\nreturn %r, %b",
        "one Exp is also a graph output"),
    "log_add_log": Case(
        "%p: f32[4,8] = Exp(%x)\n%q: f32[4,8] = Sigmoid(%y)\n%a: f32[4,8] = Log(%p)\n"
        "%b: f32[4,8] = Log(%q)\n%r: f32[4,8] = Add(%a, %b)\nreturn %r",
        "%p: f32[4,8] = Exp(%x)\n%q: f32[4,8] = Sigmoid(%y)\n%r.mul: f32[4,8] = Mul(%p, %q)\n"
        "%r: f32[4,8] = Log(%r.mul)\nreturn %r",
        "%a: f32[4,8] = Log(%x)\n%b: f32[4,8] = Log(%y)\n%r: f32[4,8] = Add(%a, %b)\nreturn %r",
        "x and y may be negative: log x + log y is NaN where log(x y) is not"),
    "log_sub_log": Case(
        "%p: f32[4,8] = Relu(%x)\n%q: f32[4,8] = Abs(%y)\n%a: f32[4,8] = Log(%p)\n"
        "%b: f32[4,8] = Log(%q)\n%r: f32[4,8] = Sub(%a, %b)\nreturn %r",
        "%p: f32[4,8] = Relu(%x)\n%q: f32[4,8] = Abs(%y)\n%r.div: f32[4,8] = Div(%p, %q)\n"
        "%r: f32[4,8] = Log(%r.div)\nreturn %r",
        "%q: f32[4,8] = Abs(%y)\n%a: f32[4,8] = Log(%x)\n%b: f32[4,8] = Log(%q)\n"
        "%r: f32[4,8] = Sub(%a, %b)\nreturn %r",
        "x may be negative", positive=True),
    "sqrt_mul_sqrt_self": Case(
        "%p: f32[4,8] = Relu(%x)\n%s: f32[4,8] = Sqrt(%p)\n%r: f32[4,8] = Mul(%s, %s)\nreturn %r",
        "%r: f32[4,8] = Relu(%x)\nreturn %r",
        "%s: f32[4,8] = Sqrt(%x)\n%r: f32[4,8] = Mul(%s, %s)\nreturn %r",
        "x may be negative: sqrt(x)^2 is NaN there, x is not"),
    "sqrt_mul_sqrt": Case(
        "%p: f32[4,8] = Relu(%x)\n%q: f32[4,8] = Sigmoid(%y)\n%a: f32[4,8] = Sqrt(%p)\n"
        "%b: f32[4,8] = Sqrt(%q)\n%r: f32[4,8] = Mul(%a, %b)\nreturn %r",
        "%p: f32[4,8] = Relu(%x)\n%q: f32[4,8] = Sigmoid(%y)\n%r.mul: f32[4,8] = Mul(%p, %q)\n"
        "%r: f32[4,8] = Sqrt(%r.mul)\nreturn %r",
        "%a: f32[4,8] = Sqrt(%x)\n%b: f32[4,8] = Sqrt(%y)\n%r: f32[4,8] = Mul(%a, %b)\nreturn %r",
        "x, y may be negative: sqrt(x) sqrt(y) is NaN where sqrt(x y) is not"),
    "sqrt_div_sqrt": Case(
        "%p: f32[4,8] = Relu(%x)\n%q: f32[4,8] = Sigmoid(%y)\n%a: f32[4,8] = Sqrt(%p)\n"
        "%b: f32[4,8] = Sqrt(%q)\n%r: f32[4,8] = Div(%a, %b)\nreturn %r",
        "%p: f32[4,8] = Relu(%x)\n%q: f32[4,8] = Sigmoid(%y)\n%r.div: f32[4,8] = Div(%p, %q)\n"
        "%r: f32[4,8] = Sqrt(%r.div)\nreturn %r",
        "%a: f32[4,8] = Sqrt(%x)\n%b: f32[4,8] = Sqrt(%y)\n%r: f32[4,8] = Div(%a, %b)\nreturn %r",
        "x, y may be negative"),
    # ---- distributivity ------------------------------------------------------------------
    "factor_mul_add": Case(
        "%a: f32[4,8] = Mul(%x, %y)\n%b: f32[4,8] = Mul(%z, %x)\n%r: f32[4,8] = Add(%a, %b)\nreturn %r",
        "%r.add: f32[4,8] = Add(%y, %z)\n%r: f32[4,8] = Mul(%x, %r.add)\nreturn %r",
        "%a: f32[4,8] = Mul(%x, %y)\n%b: f32[4,8] = Mul(%z, %x)\n%r: f32[4,8] = Add(%a, %b)\n"
        "return %r, %a",
        "x*y is also a graph output"),
    "factor_mul_sub": Case(
        "%a: f32[4,8] = Mul(%y, %x)\n%b: f32[4,8] = Mul(%x, %z)\n%r: f32[4,8] = Sub(%a, %b)\nreturn %r",
        "%r.sub: f32[4,8] = Sub(%y, %z)\n%r: f32[4,8] = Mul(%x, %r.sub)\nreturn %r",
        "%a: f32[4,8] = Mul(%y, %x)\n%b: f32[4,8] = Mul(%w, %z)\n%r: f32[4,8] = Sub(%a, %b)\nreturn %r",
        "no common factor", inputs=XYZ + ", %w: f32[4,8]"),
    "factor_add_self": Case(
        "%c: f32[] = const [0.5]\n%m: f32[4,8] = Mul(%x, %c)\n%r: f32[4,8] = Add(%x, %m)\nreturn %r",
        "%r.c: f32[] = const [1.5]\n%r: f32[4,8] = Mul(%x, %r.c)\nreturn %r",
        "%m: f32[4,8] = Mul(%x, %y)\n%r: f32[4,8] = Add(%x, %m)\nreturn %r",
        "y is a full tensor: x (y + 1) costs what x + x y costs"),
    "factor_div_add": Case(
        "%a: f32[4,8] = Div(%x, %z)\n%b: f32[4,8] = Div(%y, %z)\n%r: f32[4,8] = Add(%a, %b)\nreturn %r",
        "%r.add: f32[4,8] = Add(%x, %y)\n%r: f32[4,8] = Div(%r.add, %z)\nreturn %r",
        "%a: f32[4,8] = Div(%x, %z)\n%b: f32[4,8] = Div(%z, %y)\n%r: f32[4,8] = Add(%a, %b)\nreturn %r",
        "the divisors differ"),
    "factor_div_sub": Case(
        "%a: f32[4,8] = Div(%x, %z)\n%b: f32[4,8] = Div(%y, %z)\n%r: f32[4,8] = Sub(%a, %b)\nreturn %r",
        "%r.sub: f32[4,8] = Sub(%x, %y)\n%r: f32[4,8] = Div(%r.sub, %z)\nreturn %r",
        "%a: f32[4,8] = Div(%x, %z)\n%b: f32[4,8] = Div(%y, %z)\n%r: f32[4,8] = Sub(%a, %b)\n"
        "return %r, %b",
        "y/z is also a graph output"),
    "factor_matmul_add_left": Case(
        "%p: f32[4,16] = MatMul(%a, %b)\n%q: f32[4,16] = MatMul(%a, %c)\n"
        "%r: f32[4,16] = Add(%p, %q)\nreturn %r",
        "%r.add: f32[8,16] = Add(%b, %c)\n%r: f32[4,16] = MatMul(%a, %r.add)\nreturn %r",
        "%p: f32[4,16] = MatMul(%a, %b)\n%q: f32[4,16] = MatMul(%a, %c)\n"
        "%r: f32[4,16] = Add(%p, %q)\nreturn %r, %q",
        "a@c is also a graph output",
        inputs="%a: f32[4,8], %b: f32[8,16], %c: f32[8,16]"),
    "factor_matmul_add_right": Case(
        "%p: f32[4,16] = MatMul(%a, %c)\n%q: f32[4,16] = MatMul(%b, %c)\n"
        "%r: f32[4,16] = Add(%q, %p)\nreturn %r",
        "%r.add: f32[4,8] = Add(%b, %a)\n%r: f32[4,16] = MatMul(%r.add, %c)\nreturn %r",
        "%p: f32[4,16] = MatMul(%a, %c)\n%q: f32[4,16] = MatMul(%b, %c)\n"
        "%r: f32[4,16] = Add(%q, %p)\nreturn %r, %p",
        "a@c is also a graph output",
        inputs="%a: f32[4,8], %b: f32[4,8], %c: f32[8,16]"),
    "factor_matmul_sub_left": Case(
        "%p: f32[4,16] = MatMul(%a, %b)\n%q: f32[4,16] = MatMul(%a, %c)\n"
        "%r: f32[4,16] = Sub(%p, %q)\nreturn %r",
        "%r.sub: f32[8,16] = Sub(%b, %c)\n%r: f32[4,16] = MatMul(%a, %r.sub)\nreturn %r",
        "%p: f32[4,16] = MatMul(%a, %b)\n%q: f32[4,16] = MatMul(%a, %c)\n"
        "%r: f32[4,16] = Sub(%p, %q)\nreturn %r, %p",
        "a@b is also a graph output",
        inputs="%a: f32[4,8], %b: f32[8,16], %c: f32[8,16]"),
    "factor_matmul_sub_right": Case(
        "%p: f32[4,16] = MatMul(%a, %c)\n%q: f32[4,16] = MatMul(%b, %c)\n"
        "%r: f32[4,16] = Sub(%p, %q)\nreturn %r",
        "%r.sub: f32[4,8] = Sub(%a, %b)\n%r: f32[4,16] = MatMul(%r.sub, %c)\nreturn %r",
        "%p: f32[4,16] = MatMul(%a, %c)\n%q: f32[4,16] = MatMul(%b, %c)\n"
        "%r: f32[4,16] = Sub(%p, %q)\nreturn %r, %p",
        "a@c is also a graph output",
        inputs="%a: f32[4,8], %b: f32[4,8], %c: f32[8,16]"),
    # ---- reductions ----------------------------------------------------------------------
    "reduce_sum_add": Case(
        "%ax: i64[1] = const [1]\n%a: f32[4] = ReduceSum(%x, %ax) {keepdims=0}\n"
        "%b: f32[4] = ReduceSum(%y, %ax) {keepdims=0}\n%r: f32[4] = Add(%a, %b)\nreturn %r",
        "%ax: i64[1] = const [1]\n%r.add: f32[4,8] = Add(%x, %y)\n"
        "%r: f32[4] = ReduceSum(%r.add, %ax) {keepdims=0}\nreturn %r",
        "%ax: i64[1] = const [1]\n%a: f32[4,1] = ReduceSum(%x, %ax)\n"
        "%b: f32[4,1] = ReduceSum(%s, %ax)\n%r: f32[4,1] = Add(%a, %b)\nreturn %r",
        "x and s differ in shape: sum(x + s) would count s 8 times",
        inputs="%x: f32[4,8], %y: f32[4,8], %s: f32[4,1]"),
    "reduce_sum_sub": Case(
        "%ax: i64[1] = const [0]\n%ax2: i64[1] = const [0]\n%a: f32[1,8] = ReduceSum(%x, %ax)\n"
        "%b: f32[1,8] = ReduceSum(%y, %ax2)\n%r: f32[1,8] = Sub(%a, %b)\nreturn %r",
        "%ax: i64[1] = const [0]\n%r.sub: f32[4,8] = Sub(%x, %y)\n"
        "%r: f32[1,8] = ReduceSum(%r.sub, %ax)\nreturn %r",
        "%ax: i64[1] = const [0]\n%a: f32[1,8] = ReduceSum(%x, %ax)\n"
        "%b: f32[1,8] = ReduceSum(%y, %ax) {keepdims=1}\n%r: f32[1,8] = Sub(%a, %b)\nreturn %r",
        "the attributes differ (an explicit default still differs: @r compares attributes)"),
    "reduce_mean_add": Case(
        "%ax: i64[1] = const [-1]\n%a: f32[4,1] = ReduceMean(%x, %ax)\n"
        "%b: f32[4,1] = ReduceMean(%y, %ax)\n%r: f32[4,1] = Add(%b, %a)\nreturn %r",
        "%ax: i64[1] = const [-1]\n%r.add: f32[4,8] = Add(%y, %x)\n"
        "%r: f32[4,1] = ReduceMean(%r.add, %ax)\nreturn %r",
        "%ax: i64[1] = const [-1]\n%ax0: i64[1] = const [0]\n%a: f32[4,1] = ReduceMean(%x, %ax)\n"
        "%b: f32[1,1] = ReduceMean(%s, %ax0)\n%r: f32[4,1] = Add(%b, %a)\nreturn %r",
        "different axes and shapes",
        inputs="%x: f32[4,8], %y: f32[4,8], %s: f32[4,1]"),
    "reduce_mean_sub": Case(
        "%a: f32[1,1] = ReduceMean(%x)\n%b: f32[1,1] = ReduceMean(%y)\n"
        "%r: f32[1,1] = Sub(%a, %b)\nreturn %r",
        "%r.sub: f32[4,8] = Sub(%x, %y)\n%r: f32[1,1] = ReduceMean(%r.sub)\nreturn %r",
        "%a: f32[1,1] = ReduceMean(%x)\n%b: f32[1,1] = ReduceMean(%y)\n"
        "%r: f32[1,1] = Sub(%a, %b)\nreturn %r, %b",
        "mean(y) is also a graph output"),
    "reduce_sum_scale": Case(
        "%ax: i64[1] = const [1]\n%c: f32[] = const [3.0]\n%m: f32[4,8] = Mul(%x, %c)\n"
        "%r: f32[4] = ReduceSum(%m, %ax) {keepdims=0}\nreturn %r",
        "%ax: i64[1] = const [1]\n%c: f32[] = const [3.0]\n"
        "%r.reducesum: f32[4] = ReduceSum(%x, %ax) {keepdims=0}\n%r: f32[4] = Mul(%r.reducesum, %c)\n"
        "return %r",
        "%ax: i64[1] = const [1]\n%c: f32[1,1,1] = const [3.0]\n%m: f32[1,4,8] = Mul(%x, %c)\n"
        "%r: f32[1,8] = ReduceSum(%m, %ax) {keepdims=0}\nreturn %r",
        "the one-element constant broadcasts x to rank 3, so the axes would mean other axes"),
    "reduce_mean_scale": Case(
        "%c: f32[1] = const [3.0]\n%m: f32[4,8] = Mul(%c, %x)\n"
        "%r: f32[1,1] = ReduceMean(%m)\nreturn %r",
        "%c: f32[1] = const [3.0]\n%r.reducemean: f32[1,1] = ReduceMean(%x)\n"
        "%r: f32[1,1] = Mul(%r.reducemean, %c)\nreturn %r",
        "%c: f32[8] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n%m: f32[4,8] = Mul(%c, %x)\n"
        "%r: f32[1,1] = ReduceMean(%m)\nreturn %r",
        "a per-column scale does not commute with the mean over columns"),
    "matmul_scale_out_left": Case(
        "%c: f32[] = const [0.5]\n%m: f32[2,16] = Mul(%a, %c)\n%r: f32[2,2] = MatMul(%m, %b)\n"
        "return %r",
        "%c: f32[] = const [0.5]\n%r.matmul: f32[2,2] = MatMul(%a, %b)\n"
        "%r: f32[2,2] = Mul(%r.matmul, %c)\nreturn %r",
        "%c: f32[] = const [0.5]\n%m: f32[2,4] = Mul(%s, %c)\n%r: f32[2,16] = MatMul(%m, %t)\n"
        "return %r",
        "the scaled operand is smaller than the product: scaling it is cheaper",
        inputs="%a: f32[2,16], %b: f32[16,2], %s: f32[2,4], %t: f32[4,16]"),
    "matmul_scale_out_right": Case(
        "%c: f32[] = const [0.5]\n%m: f32[16,2] = Mul(%b, %c)\n%r: f32[2,2] = MatMul(%a, %m)\n"
        "return %r",
        "%c: f32[] = const [0.5]\n%r.matmul: f32[2,2] = MatMul(%a, %b)\n"
        "%r: f32[2,2] = Mul(%r.matmul, %c)\nreturn %r",
        "%c: f32[] = const [0.5]\n%m: f32[4,2] = Mul(%t, %c)\n%r: f32[16,2] = MatMul(%s, %m)\n"
        "return %r",
        "the scaled operand is smaller than the product",
        inputs="%a: f32[2,16], %b: f32[16,2], %s: f32[16,4], %t: f32[4,2]"),
    "matmul_scale_in_left": Case(
        "%c: f32[] = const [0.125]\n%p: f32[2,16] = MatMul(%a, %b)\n%r: f32[2,16] = Mul(%p, %c)\n"
        "return %r",
        "%c: f32[] = const [0.125]\n%r.mul: f32[2,4] = Mul(%a, %c)\n"
        "%r: f32[2,16] = MatMul(%r.mul, %b)\nreturn %r",
        "%c: f32[] = const [0.125]\n%p: f32[16,2] = MatMul(%s, %t)\n%r: f32[16,2] = Mul(%p, %c)\n"
        "return %r",
        "both operands are larger than the product",
        inputs="%a: f32[2,4], %b: f32[4,16], %s: f32[16,4], %t: f32[4,2]"),
    "matmul_scale_in_right": Case(
        "%w: f32[4,2] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n%c: f32[] = const [0.5]\n"
        "%p: f32[16,2] = MatMul(%a, %w)\n%r: f32[16,2] = Mul(%c, %p)\nreturn %r",
        "%r.c: f32[4,2] = const [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]\n"
        "%r: f32[16,2] = MatMul(%a, %r.c)\nreturn %r",
        "%w: f32[4,2] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n%c: f32[] = const [0.125]\n"
        "%p: f32[16,2] = MatMul(%a, %w)\n%r: f32[16,2] = Mul(%p, %c)\nreturn %r, %p",
        "the product is also a graph output",
        inputs="%a: f32[16,4]"),
    "softmax_shift": Case(
        "%c: f32[] = const [3.0]\n%s: f32[4,8] = Add(%x, %c)\n%r: f32[4,8] = Softmax(%s) {axis=-1}\n"
        "return %r",
        "%r: f32[4,8] = Softmax(%x) {axis=-1}\nreturn %r",
        "%c: f32[1,8] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n%s: f32[4,8] = Add(%x, %c)\n"
        "%r: f32[4,8] = Softmax(%s) {axis=-1}\nreturn %r",
        "a shift that varies along the softmax axis changes the result"),
}

RULES = _core.algebra_rules()
RULE_NAMES = [r[0] for r in RULES]


def graph(body: str, inputs: str = XYZ) -> df.ECG:
    lines = "\n".join("  " + line for line in body.strip().splitlines())
    return df.parse(f"graph g({inputs}) {{\n{lines}\n}}\n")


def text(g: df.ECG) -> str:
    """The graph's text without node names (@"..."), which are provenance, not meaning."""
    return re.sub(r' @"[^"]*"', "", g.to_text())


def feeds(g: df.ECG, positive: bool, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for v in g.inputs:
        x = rng.uniform(0.5, 2.0, v.shape) if positive else rng.standard_normal(v.shape)
        out.append(x.astype(np.float32))
    return out


def rewrite_traced(g: df.ECG) -> tuple[df.ECG, list[str]]:
    out, fired = _core.apply_algebraic_rules_traced(g.graph)
    out = df.ECG(out)
    out.verify()
    return out, fired


def test_every_rule_has_a_case():
    missing = [n for n in RULE_NAMES if n not in CASES]
    stale = [n for n in CASES if n not in RULE_NAMES]
    assert not missing, f"rules without a test case in CASES: {missing}"
    assert not stale, f"cases for rules that no longer exist: {stale}"
    assert len(set(RULE_NAMES)) == len(RULE_NAMES)


def test_rule_table_rows_are_documented():
    for name, pattern, replacement, math in RULES:
        assert re.fullmatch(r"[a-z0-9_]+", name)
        assert pattern and replacement and math, name


@pytest.mark.parametrize("name", RULE_NAMES)
def test_rule_rewrites(name):
    case = CASES[name]
    before = graph(case.before, case.inputs)
    after, fired = rewrite_traced(before)
    assert name in fired, f"{name} did not fire; fired: {fired}"
    assert text(after) == text(graph(case.after, case.inputs))
    assert rw.flops(after) < rw.flops(before) or len(after) < len(before)


@pytest.mark.parametrize("name", RULE_NAMES)
def test_rule_does_not_apply(name):
    case = CASES[name]
    g = graph(case.negative, case.inputs)
    _, fired = rewrite_traced(g)
    assert name not in fired, case.why


@pytest.mark.parametrize("name", RULE_NAMES)
def test_rule_keeps_values(name):
    case = CASES[name]
    before = graph(case.before, case.inputs)
    after, _ = rewrite_traced(before)
    for seed in range(2):
        x = feeds(before, case.positive, seed)
        for want, got in zip(before.run_reference(*x), after.run_reference(*x)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_integer_tensors_are_not_rewritten():
    # Integer Div truncates: (a/b)/c and a/(b*c) differ for negative values and overflow.
    g = graph("%d: i32[4] = Div(%x, %y)\n%r: i32[4] = Div(%d, %z)\nreturn %r",
              "%x: i32[4], %y: i32[4], %z: i32[4]")
    out, fired = rewrite_traced(g)
    assert fired == [] and text(out) == text(g)


def test_rules_reach_a_fixpoint_through_chains():
    # (((x / 2) * 3) * 4) / 8 -> x * 0.75, one Mul
    g = graph("%a: f32[] = const [2.0]\n%b: f32[] = const [3.0]\n%c: f32[] = const [4.0]\n"
              "%d: f32[] = const [8.0]\n%p: f32[4,8] = Div(%x, %a)\n%q: f32[4,8] = Mul(%p, %b)\n"
              "%s: f32[4,8] = Mul(%q, %c)\n%r: f32[4,8] = Div(%s, %d)\nreturn %r")
    out, fired = rewrite_traced(g)
    # (each sweep names its constant after the root; the name of the previous sweep's is taken)
    assert text(out) == text(graph("%r.c.2: f32[] = const [0.75]\n%r: f32[4,8] = Mul(%x, %r.c.2)\n"
                                   "return %r"))
    assert fired.count("mul_mul_const") >= 1


def test_rule_pattern_errors_are_internal_errors():
    # The table is parsed once; a bad table would make every call raise InternalError.
    assert len(_core.algebra_rules()) == len(RULES)
    g = graph("%r: f32[4,8] = Add(%x, %y)\nreturn %r")
    assert _core.apply_algebraic_rules(g.graph).to_text() == g.to_text()


def test_symbolic_shapes_are_left_to_op_count():
    # Symbolic sizes cost 0 FLOPs: only rules that remove operators may fire.
    g = graph("%n: f32[b,8] = Neg(%x)\n%r: f32[b,8] = Neg(%n)\n%c: f32[] = const [0.5]\n"
              "%p: f32[b,4] = MatMul(%r, %w)\n%s: f32[b,4] = Mul(%p, %c)\nreturn %s",
              "%x: f32[b,8], %w: f32[8,4]")
    out, fired = rewrite_traced(g)
    assert fired == ["neg_neg"]
    assert [n.op for n in out.nodes] == ["MatMul", "Mul"]


# ---- constant folding ----------------------------------------------------------------------
def test_fold_constants_folds_constant_subgraphs_and_shapes():
    g = graph("%a: f32[2] = const [1.0, 4.0]\n%s: f32[2] = Sqrt(%a)\n%t: f32[2] = Neg(%s)\n"
              "%shape: i64[2] = Shape(%x)\n%n: i64[] = Size(%x)\n"
              "%u: f32[4,8] = Add(%x, %x)\nreturn %u, %t, %shape, %n", "%x: f32[4,8]")
    out = rw.fold_constants(g)
    out.verify()
    assert [n.op for n in out.nodes] == ["Add"]
    consts = {c.name: c.numpy() for c in out.constants}
    np.testing.assert_array_equal(consts["t"], [-1.0, -2.0])
    np.testing.assert_array_equal(consts["shape"], [4, 8])
    assert consts["n"] == 32 and consts["n"].shape == ()
    x = feeds(g, False)
    for a, b in zip(g.run_reference(*x), out.run_reference(*x)):
        np.testing.assert_array_equal(a, b)


def test_fold_constants_keeps_outputs_much_larger_than_inputs():
    g = graph("%s: i64[2] = const [512, 512]\n%e: f32[] = const [1.0]\n"
              "%big: f32[512,512] = Expand(%e, %s)\n%r: f32[512,512] = Add(%big, %x)\nreturn %r",
              "%x: f32[512,512]")
    out = rw.fold_constants(g)
    assert [n.op for n in out.nodes] == ["Expand", "Add"]   # 1 MiB from 8 bytes: kept
    small = graph("%s: i64[2] = const [4, 8]\n%e: f32[] = const [1.0]\n"
                  "%big: f32[4,8] = Expand(%e, %s)\n%r: f32[4,8] = Add(%big, %x)\nreturn %r",
                  "%x: f32[4,8]")
    assert [n.op for n in rw.fold_constants(small).nodes] == ["Add"]


def test_fold_constants_uses_the_given_evaluator_and_respects_declines():
    calls = []

    def evaluator(op, inputs, attrs, num_outputs):
        calls.append(op)
        if op == "Exp":
            raise NotImplementedError("not here")
        return [np.asarray(-inputs[0])]

    g = graph("%a: f32[2] = const [1.0, 4.0]\n%n: f32[2] = Neg(%a)\n%e: f32[2] = Exp(%n)\n"
              "return %e", "%x: f32[4,8]")
    out = rw.fold_constants(g, evaluator)
    assert calls == ["Neg", "Exp"]
    assert [n.op for n in out.nodes] == ["Exp"]
    np.testing.assert_array_equal(out.nodes[0].inputs[0].numpy(), [-1.0, -4.0])


def test_fold_constants_rejects_a_wrong_evaluator():
    g = graph("%a: f32[2] = const [1.0, 4.0]\n%n: f32[2] = Neg(%a)\nreturn %n", "%x: f32[4,8]")
    with pytest.raises(df.InternalError, match="evaluated 'n' to f64"):
        rw.fold_constants(g, lambda op, ins, attrs, n: [np.zeros(2)])


# ---- BatchNormalization folding ------------------------------------------------------------
def _conv_bn_graph(dims: int, groups: int, bias: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    cin, cout, n = 4, 8, 2
    spatial = [7, 6, 5][:dims]
    kernel = [3, 2, 3][:dims]
    g = _core.Graph("convbn")
    x = g.add_input("x", "f32", [n, cin, *spatial])
    w = g.add_constant("w", rng.standard_normal((cout, cin // groups, *kernel)).astype(np.float32))
    ins = [x, w]
    if bias:
        ins.append(g.add_constant("b", rng.standard_normal(cout).astype(np.float32)))
    (y,) = g.add_node("Conv", ins, {"group": groups, "pads": [1] * (2 * dims)}, 1, "conv")
    params = [rng.uniform(0.5, 2, cout), rng.standard_normal(cout), rng.standard_normal(cout),
              rng.uniform(0.5, 2, cout)]
    consts = [g.add_constant("bn." + nm, p.astype(np.float32))
              for nm, p in zip(["scale", "bias", "mean", "var"], params)]
    (z,) = g.add_node("BatchNormalization", [y, *consts], {"epsilon": 1e-3}, 1, "bn")
    (r,) = g.add_node("Relu", [z], {}, 1, "relu")
    g.set_outputs([r])
    return df.ECG(g), params


@pytest.mark.parametrize("dims,groups,bias", [(1, 1, True), (2, 1, False), (2, 2, True),
                                              (2, 4, False), (3, 1, True), (3, 2, False)])
def test_fold_batch_norm_into_conv(dims, groups, bias):
    g, _ = _conv_bn_graph(dims, groups, bias)
    out = rw.fold_batch_norm(g)
    out.verify()
    assert [n.op for n in out.nodes] == ["Conv", "Relu"]
    assert out.nodes[0].attrs["group"] == groups
    x = np.random.default_rng(1).standard_normal(g.inputs[0].shape).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(x)[0], g.run_reference(x)[0], rtol=1e-4, atol=1e-5)


def _randomize_torch_bn(bn) -> None:
    """Non-trivial scale, shift and running statistics for a torch BatchNorm."""
    import torch

    with torch.no_grad():
        bn.weight.uniform_(0.5, 2)
        bn.bias.normal_()
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2)


def _add_torch_bn(g, y, bn, attrs: dict):
    """A BatchNormalization of y in g with the parameters of the torch BatchNorm `bn`."""
    ps = [bn.weight, bn.bias, bn.running_mean, bn.running_var]
    (z,) = g.add_node("BatchNormalization",
                      [y, *[g.add_constant(f"p{i}", p.detach().numpy()) for i, p in enumerate(ps)]],
                      attrs, 1)
    return z


@pytest.mark.parametrize("dims,groups,bias", [(1, 1, False), (2, 2, True), (3, 1, True)])
def test_fold_batch_norm_matches_torch_eval(dims, groups, bias):
    torch = pytest.importorskip("torch")
    conv_cls = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[dims]
    bn_cls = {1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d, 3: torch.nn.BatchNorm3d}[dims]
    torch.manual_seed(0)
    conv = conv_cls(4, 6, 3, padding=1, groups=groups, bias=bias)
    bn = bn_cls(6, eps=1e-3)
    _randomize_torch_bn(bn)
    model = torch.nn.Sequential(conv, bn).eval()
    g = _core.Graph("t")
    shape = [2, 4, *[5] * dims]
    x = g.add_input("x", "f32", shape)
    ins = [x, g.add_constant("w", conv.weight.detach().numpy())]
    if bias:
        ins.append(g.add_constant("b", conv.bias.detach().numpy()))
    (y,) = g.add_node("Conv", ins, {"group": groups, "pads": [1] * (2 * dims)}, 1)
    z = _add_torch_bn(g, y, bn, {"epsilon": 1e-3})
    g.set_outputs([z])
    out = rw.fold_batch_norm(df.ECG(g))
    assert [n.op for n in out.nodes] == ["Conv"]
    xv = torch.randn(*shape)
    with torch.no_grad():
        want = model(xv).numpy()
    np.testing.assert_allclose(out.run_reference(xv.numpy())[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (6,), (1, 6), (3, 1), ()])
def test_fold_batch_norm_into_gemm(trans_b, c_shape):
    rng = np.random.default_rng(2)
    g = _core.Graph("gemmbn")
    a = g.add_input("a", "f32", [3, 5])
    b = g.add_constant("B", rng.standard_normal((6, 5) if trans_b else (5, 6)).astype(np.float32))
    ins = [a, b]
    if c_shape is not None:
        ins.append(g.add_constant("C", np.asarray(rng.standard_normal(c_shape), np.float32)))
    (y,) = g.add_node("Gemm", ins, {"transB": trans_b, "alpha": 0.5, "beta": 2.0}, 1)
    ps = [rng.uniform(0.5, 2, 6), rng.standard_normal(6), rng.standard_normal(6), rng.uniform(0.5, 2, 6)]
    (z,) = g.add_node("BatchNormalization",
                      [y, *[g.add_constant(f"p{i}", p.astype(np.float32)) for i, p in enumerate(ps)]], {}, 1)
    g.set_outputs([z])
    before = df.ECG(g)
    out = rw.fold_batch_norm(before)
    out.verify()
    assert [n.op for n in out.nodes] == ["Gemm"]
    x = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(x)[0], before.run_reference(x)[0], rtol=1e-4, atol=1e-5)


def test_fold_batch_norm_into_gemm_matches_torch_linear_bn_eval():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    lin, bn = torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6)
    _randomize_torch_bn(bn)
    model = torch.nn.Sequential(lin, bn).eval()
    g = _core.Graph("t")
    a = g.add_input("a", "f32", [3, 5])
    (y,) = g.add_node("Gemm", [a, g.add_constant("W", lin.weight.detach().numpy()),
                               g.add_constant("b", lin.bias.detach().numpy())], {"transB": 1}, 1)
    z = _add_torch_bn(g, y, bn, {})
    g.set_outputs([z])
    out = rw.fold_batch_norm(df.ECG(g))
    assert [n.op for n in out.nodes] == ["Gemm"]
    x = torch.randn(3, 5)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(out.run_reference(x.numpy())[0], want, rtol=1e-4, atol=1e-5)


def test_fold_batch_norm_absorbs_per_channel_mul_add_chains():
    # conv -> bn -> *k -> +d -> /e -> -f -> relu, the constants broadcasting per channel
    g, _ = _conv_bn_graph(2, 1, True)
    src = g.graph
    g2 = _core.Graph("chain")
    x = g2.add_input("x", "f32", src.inputs[0].shape)
    conv_node = src.nodes[0]
    cins = [x] + [g2.add_constant(v.name, v.numpy()) for v in conv_node.inputs[1:]]
    (y,) = g2.add_node("Conv", cins, conv_node.attrs, 1, "conv")
    bn = src.nodes[1]
    (z,) = g2.add_node("BatchNormalization",
                       [y] + [g2.add_constant(v.name, v.numpy()) for v in bn.inputs[1:]], bn.attrs, 1)
    rng = np.random.default_rng(3)
    k = g2.add_constant("k", rng.uniform(0.5, 2, (8, 1, 1)).astype(np.float32))
    d = g2.add_constant("d", rng.standard_normal((1, 8, 1, 1)).astype(np.float32))
    e = g2.add_constant("e", np.float32(2.0).reshape(()))
    f = g2.add_constant("f", rng.standard_normal((8, 1, 1)).astype(np.float32))
    (m,) = g2.add_node("Mul", [k, z], {}, 1)
    (a,) = g2.add_node("Add", [m, d], {}, 1)
    (q,) = g2.add_node("Div", [a, e], {}, 1)
    (s,) = g2.add_node("Sub", [q, f], {}, 1)
    (r,) = g2.add_node("Relu", [s], {}, 1)
    g2.set_outputs([r])
    before = df.ECG(g2)
    out = rw.fold_batch_norm(before)
    assert [n.op for n in out.nodes] == ["Conv", "Relu"]
    xv = np.random.default_rng(4).standard_normal(before.inputs[0].shape).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(xv)[0], before.run_reference(xv)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["second_consumer", "per_spatial", "not_constant", "graph_output"])
def test_fold_batch_norm_does_not_apply(case):
    rng = np.random.default_rng(5)
    g = _core.Graph("no")
    x = g.add_input("x", "f32", [1, 3, 4, 4])
    w = g.add_constant("w", rng.standard_normal((2, 3, 1, 1)).astype(np.float32))
    (y,) = g.add_node("Conv", [x, w], {}, 1, "conv")
    if case == "per_spatial":   # varies along W: not a per-channel map
        c = g.add_constant("c", rng.standard_normal((1, 1, 4)).astype(np.float32))
        (z,) = g.add_node("Mul", [y, c], {}, 1)
    elif case == "not_constant":
        s = g.add_input("s", "f32", [2, 1, 1])
        (z,) = g.add_node("Mul", [y, s], {}, 1)
    else:
        c = g.add_constant("c", rng.standard_normal((2, 1, 1)).astype(np.float32))
        (z,) = g.add_node("Add", [y, c], {}, 1)
    outs = [z]
    if case == "second_consumer":
        (r,) = g.add_node("Relu", [y], {}, 1)
        outs.append(r)
    if case == "graph_output":
        outs.append(y)
    g.set_outputs(outs)
    out = rw.fold_batch_norm(df.ECG(g))
    assert len(out.nodes) == len(g.nodes)


# ---- the Python pipeline -------------------------------------------------------------------
def test_rewrite_pipeline_reports_every_pass():
    g = graph("%c: f32[] = const [2.0]\n%i: f32[4,8] = Identity(%x)\n%p: f32[4,8] = Pow(%i, %c)\n"
              "%q: f32[4,8] = Div(%p, %c)\nreturn %q")
    out, report = rw.rewrite(g)
    assert [p.name for p in report.passes] == [p.__name__ for p in rw.DEFAULT_PASSES]
    assert report.operators_before == 3 and report.operators_after == 2
    assert report.flops_after < report.flops_before
    assert report.rules_fired == {"pow_two": 1, "div_to_mul": 1}
    assert "pow_two x1" in str(report)
    x = feeds(g, False)
    np.testing.assert_allclose(out.run_reference(*x)[0], g.run_reference(*x)[0], rtol=1e-6)


def test_rewrite_runs_a_custom_pass_list_and_verifies():
    g = graph("%n: f32[4,8] = Neg(%x)\n%r: f32[4,8] = Neg(%n)\nreturn %r")
    out, report = rw.rewrite(g, passes=[rw.apply_algebraic_rules, rw.eliminate_dead_code])
    assert len(out) == 0 and report.rules_fired == {"neg_neg": 1}
    rules = rw.algebra_rules()
    assert rules[0].name == RULE_NAMES[0] and rules[0].math


# ---- whole blocks, as exporters write them -------------------------------------------------
class _B:
    """A few lines of graph building for the block tests."""

    def __init__(self, name: str, seed: int = 0):
        self.g = _core.Graph(name)
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def c(self, x) -> object:
        self.n += 1
        return self.g.add_constant(f"c{self.n}", np.asarray(x, np.float32))

    def w(self, *shape, scale: float = 0.1) -> object:
        return self.c(self.rng.standard_normal(shape) * scale)

    def i64(self, *xs) -> object:
        self.n += 1
        return self.g.add_constant(f"i{self.n}", np.asarray(xs, np.int64))

    def __call__(self, op, *inputs, **attrs):
        return self.g.add_node(op, list(inputs), attrs, 1)[0]


def _layer_norm_decomposed(b: _B, h, hidden: int):
    # what torch.onnx (opset < 17) writes for nn.LayerNorm
    mean = b("ReduceMean", h, b.i64(-1))
    d = b("Sub", h, mean)
    var = b("ReduceMean", b("Pow", d, b.c(2.0)), b.i64(-1))
    std = b("Sqrt", b("Add", var, b.c(1e-12)))
    return b("Add", b("Mul", b("Div", d, std), b.c(1 + b.rng.standard_normal(hidden) * 0.1)),
             b.w(hidden))


def bert_like_block(seq: int = 16, hidden: int = 32, heads: int = 4, ffn: int = 64) -> df.ECG:
    """One BERT encoder layer as torch.onnx exports it: scaled attention with an additive
    mask, decomposed LayerNorm and erf-GELU."""
    b = _B("bert_block")
    dh = hidden // heads
    x = b.g.add_input("x", "f32", [1, seq, hidden])
    mask = b.g.add_input("mask", "f32", [1, 1, 1, seq])
    ext = b("Mul", b("Sub", b.c(1.0), mask), b.c(-10000.0))

    def proj(t, perm):
        y = b("Add", b("MatMul", t, b.w(hidden, hidden)), b.w(hidden))
        y = b("Reshape", y, b.i64(1, seq, heads, dh))
        return b("Transpose", y, perm=perm)

    q, k, v = proj(x, [0, 2, 1, 3]), proj(x, [0, 2, 3, 1]), proj(x, [0, 2, 1, 3])
    scores = b("Div", b("MatMul", q, k), b.c(np.sqrt(dh)))
    p = b("Softmax", b("Add", scores, ext), axis=-1)
    ctx = b("Reshape", b("Transpose", b("MatMul", p, v), perm=[0, 2, 1, 3]), b.i64(1, seq, hidden))
    h = b("Add", b("Add", b("MatMul", ctx, b.w(hidden, hidden)), b.w(hidden)), x)
    h = _layer_norm_decomposed(b, h, hidden)
    f = b("Add", b("MatMul", h, b.w(hidden, ffn)), b.w(ffn))
    gelu = b("Mul", b("Mul", f, b("Add", b("Erf", b("Div", f, b.c(1.4142135))), b.c(1.0))), b.c(0.5))
    o = b("Add", b("Add", b("MatMul", gelu, b.w(ffn, hidden)), b.w(hidden)), h)
    b.g.set_outputs([_layer_norm_decomposed(b, o, hidden)])
    return df.ECG(b.g)


def mbconv_se_block(ch: int = 8, expand: int = 4, size: int = 8, se: int = 2) -> df.ECG:
    """An EfficientNet MBConv block: 1x1 expand, depthwise 3x3, squeeze-and-excitation,
    1x1 project, each conv followed by BatchNormalization, Swish as x * Sigmoid(x)."""
    b = _B("mbconv_se")
    x = b.g.add_input("x", "f32", [1, ch, size, size])
    mid = ch * expand

    def bn(t, c):
        return b("BatchNormalization", t, b.c(b.rng.uniform(0.5, 2, c)), b.w(c), b.w(c),
                 b.c(b.rng.uniform(0.5, 2, c)), epsilon=1e-3)

    def swish(t):
        return b("Mul", t, b("Sigmoid", t))

    h = swish(bn(b("Conv", x, b.w(mid, ch, 1, 1)), mid))
    h = swish(bn(b("Conv", h, b.w(mid, 1, 3, 3), group=mid, pads=[1, 1, 1, 1]), mid))
    s = b("ReduceMean", h, b.i64(2, 3))
    s = swish(b("Conv", s, b.w(se, mid, 1, 1), b.w(se)))
    s = b("Sigmoid", b("Conv", s, b.w(mid, se, 1, 1), b.w(mid)))
    h = b("Mul", h, s)
    h = bn(b("Conv", h, b.w(ch, mid, 1, 1)), ch)
    b.g.set_outputs([b("Add", h, x)])
    return df.ECG(b.g)


def test_bert_like_block_gets_cheaper_and_keeps_values():
    g = bert_like_block()
    out, report = rw.rewrite(g)
    fired = report.rules_fired
    assert {"pow_two", "div_to_mul", "matmul_scale_in_left"} <= set(fired), fired
    assert report.flops_after < report.flops_before
    assert [n.op for n in out.nodes].count("Pow") == 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 32)).astype(np.float32)
    mask = (rng.uniform(size=(1, 1, 1, 16)) > 0.2).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(x, mask)[0], g.run_reference(x, mask)[0],
                               rtol=1e-4, atol=1e-4)


def test_mbconv_se_block_loses_its_batch_norms():
    g = mbconv_se_block()
    out, report = rw.rewrite(g)
    ops = [n.op for n in out.nodes]
    assert "BatchNormalization" not in ops and ops.count("Conv") == 5
    assert report.operators_after == report.operators_before - 3
    x = np.random.default_rng(0).standard_normal((1, 8, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(x)[0], g.run_reference(x)[0], rtol=1e-4, atol=1e-4)
