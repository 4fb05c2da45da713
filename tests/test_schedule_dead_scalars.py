"""schedule-dead-scalars, IR in / IR out: stores into local scalars that no load reads go, and
so do the loop-carried values that only fed them; everything a later load can see stays."""

from __future__ import annotations

import textwrap

from mlir import ir

from polyflow.passes import function_pass_manager
from polyflow.schedule.dead_scalars import drop_dead_scalars

# A row recurrence (deriche's): the state is reset per row, yet the row loop carries it to a
# store after the loop that nothing reads.
ROW_RECURRENCE = """
func.func @rows(%n: index, %a: memref<8x8xf64>, %b: memref<8x8xf64>) {
  %s = memref.alloca() : memref<f64>
  %zero = arith.constant 0.0 : f64
  %init = affine.load %s[] : memref<f64>
  %r = affine.for %i = 0 to 8 iter_args(%outer = %init) -> (f64) {
    %last = affine.for %j = 0 to 8 iter_args(%y = %zero) -> (f64) {
      %x = affine.load %a[%i, %j] : memref<8x8xf64>
      %v = arith.addf %x, %y : f64
      affine.store %v, %b[%i, %j] : memref<8x8xf64>
      affine.yield %v : f64
    }
    affine.yield %last : f64
  }
  affine.store %r, %s[] : memref<f64>
  return
}
"""


def _run(text: str) -> tuple[str, int]:
    ctx = ir.Context()
    module = ir.Module.parse(textwrap.dedent(text), ctx)
    fn = module.body.operations[0].operation
    removed = drop_dead_scalars(fn)
    module.operation.verify()
    return str(module), removed


def test_row_loop_no_longer_carries_state_nobody_reads() -> None:
    out, removed = _run(ROW_RECURRENCE)
    assert removed == 2  # the store after the loop, the row loop's carried value
    assert "affine.store %1, %alloca" not in out
    rows = out[out.index("affine.for %arg3") :]
    assert rows.split("\n")[0].rstrip().endswith("{")  # no iter_args on the row loop
    assert "iter_args(%arg5 = %cst)" in out  # the recurrence itself stays


def test_a_value_read_after_the_loop_stays() -> None:
    text = ROW_RECURRENCE.replace(
        "  affine.store %r, %s[] : memref<f64>\n",
        "  affine.store %r, %s[] : memref<f64>\n"
        "  %again = affine.load %s[] : memref<f64>\n"
        "  affine.store %again, %b[0, 0] : memref<8x8xf64>\n",
    )
    out, removed = _run(text)
    assert removed == 0
    assert "iter_args(%arg4 = %0)" in out


def test_a_store_read_by_the_next_iteration_stays() -> None:
    text = """
    func.func @carried(%a: memref<8xf64>) {
      %s = memref.alloca() : memref<f64>
      %zero = arith.constant 0.0 : f64
      affine.store %zero, %s[] : memref<f64>
      affine.for %i = 0 to 8 {
        %prev = affine.load %s[] : memref<f64>
        %x = affine.load %a[%i] : memref<8xf64>
        %v = arith.addf %x, %prev : f64
        affine.store %v, %a[%i] : memref<8xf64>
        affine.store %x, %s[] : memref<f64>
      }
      return
    }
    """
    out, removed = _run(text)
    assert removed == 0
    assert out.count("affine.store") == 3


def test_overwritten_before_any_read_and_last_stores_go() -> None:
    text = """
    func.func @twice(%a: memref<8xf64>) {
      %s = memref.alloca() : memref<f64>
      %one = arith.constant 1.0 : f64
      %two = arith.constant 2.0 : f64
      affine.store %one, %s[] : memref<f64>
      affine.store %two, %s[] : memref<f64>
      %v = affine.load %s[] : memref<f64>
      affine.store %v, %a[0] : memref<8xf64>
      affine.store %one, %s[] : memref<f64>
      return
    }
    """
    out, removed = _run(text)
    assert removed == 2
    assert "affine.store %cst, %alloca" not in out
    assert "affine.store %cst_0, %alloca" in out


def test_a_store_in_one_branch_read_after_the_if_stays() -> None:
    text = """
    func.func @branch(%n: index, %a: memref<8xf64>) {
      %s = memref.alloca() : memref<f64>
      %one = arith.constant 1.0 : f64
      affine.store %one, %s[] : memref<f64>
      affine.if affine_set<()[s0] : (s0 - 1 >= 0)>()[%n] {
        %x = affine.load %a[1] : memref<8xf64>
        affine.store %x, %s[] : memref<f64>
      }
      %v = affine.load %s[] : memref<f64>
      affine.store %v, %a[0] : memref<8xf64>
      return
    }
    """
    out, removed = _run(text)
    assert removed == 0
    assert out.count("affine.store") == 3


def test_a_scalar_passed_to_a_call_is_left_alone() -> None:
    text = """
    func.func private @sink(memref<f64>)
    func.func @escapes(%a: memref<8xf64>) {
      %s = memref.alloca() : memref<f64>
      %one = arith.constant 1.0 : f64
      affine.store %one, %s[] : memref<f64>
      func.call @sink(%s) : (memref<f64>) -> ()
      return
    }
    """
    ctx = ir.Context()
    module = ir.Module.parse(textwrap.dedent(text), ctx)
    fn = module.body.operations[1].operation
    assert drop_dead_scalars(fn) == 0
    assert "affine.store %cst, %alloca" in str(module)


def test_runs_as_a_registered_pass() -> None:
    with ir.Context():
        module = ir.Module.parse(textwrap.dedent(ROW_RECURRENCE))
        for element in ("schedule-dead-scalars", "canonicalize"):
            function_pass_manager(element).run(module.body.operations[0].operation)
        out = str(module)
    assert "memref.alloca" not in out  # its loads and the alloca itself folded away
    assert out.count("iter_args") == 1


def test_a_slot_that_yields_its_own_block_argument_keeps_it_after_the_drop() -> None:
    # random program 166 at -O3: `yield %b, %b` with slot 0 unused; the kept slot yields its own
    # argument, which must become the new loop's (the old one is erased with the loop)
    out, removed = _run(
        """
        func.func @f(%n: index, %out: memref<f64>) {
          %c = arith.constant 1.0 : f64
          %r:2 = affine.for %i = 0 to %n iter_args(%a = %c, %b = %c) -> (f64, f64) {
            affine.yield %b, %b : f64, f64
          }
          affine.store %r#1, %out[] : memref<f64>
          return
        }
        """
    )
    assert removed == 1
    assert "iter_args(%arg3 = %cst) -> (f64)" in out and "affine.yield %arg3 : f64" in out
