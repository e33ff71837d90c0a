"""The algebraic rewrite rules of paper §4.2 (cpp/rewrite/algebra.cc), rule by rule: for every
rule a before/after pair in ECG text, a case where it must not fire, and the reference
interpreter's values before and after; integer tensors left alone, chains reaching a
fixpoint, symbolic shapes. Constant and BatchNormalization folding are tested in
test_rewrite_folding.py, the Python pipeline in test_rewrite_pipeline.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

from rewrite_helpers import RULE_NAMES, RULES, XYZ, feeds, graph, rw


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
    # ---- activations written out -----------------------------------------------------------
    "mish": Case(
        "%s: f32[4,8] = Softplus(%x)\n%t: f32[4,8] = Tanh(%s)\n%r: f32[4,8] = Mul(%t, %x)\nreturn %r",
        "%r: f32[4,8] = Mish(%x)\nreturn %r",
        "%s: f32[4,8] = Softplus(%x)\n%t: f32[4,8] = Tanh(%s)\n%r: f32[4,8] = Mul(%t, %y)\nreturn %r",
        "y tanh(softplus(x)) is not mish of anything"),
}


def text(g: df.ECG) -> str:
    """The graph's text without node names (@"..."), which are provenance, not meaning."""
    return re.sub(r' @"[^"]*"', "", g.to_text())


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


def test_mish_is_left_when_its_parts_are_read_elsewhere():
    """With the Softplus also read by another node, replacing the Mul and Tanh by a Mish would
    compute more (the Softplus stays), so the rule does not fire."""
    g = graph("%s: f32[4,8] = Softplus(%x)\n%t: f32[4,8] = Tanh(%s)\n%r: f32[4,8] = Mul(%x, %t)\n"
              "%q: f32[4,8] = Add(%s, %y)\nreturn %r, %q")
    out, fired = rewrite_traced(g)
    assert "mish" not in fired and text(out) == text(g)
