// raise-mem2reg: scalar allocas → SSA values threaded through scf.for / scf.if / scf.while.
// RUN: polyflow-opt --pass 'raise-mem2reg' %s | filecheck %s
// RUN: polyflow-opt --pass 'raise-mem2reg' --debug-info %s | filecheck %s --check-prefix=LOC

// Straight-line code: loads take the value last stored; memref<1xT> at constant index 0 too.
// CHECK-LABEL: func.func @straight
// CHECK-SAME: (%[[X:.*]]: f64, %[[Y:.*]]: i32)
// CHECK-NOT: memref.
// CHECK: %[[S:.*]] = arith.addf %[[X]], %[[X]] : f64
// CHECK-NEXT: return %[[S]], %[[Y]] : f64, i32
func.func @straight(%x: f64, %y: i32) -> (f64, i32) {
  %a = memref.alloca() : memref<f64>
  %b = memref.alloca() : memref<1xi32>
  %c0 = arith.constant 0 : index
  memref.store %x, %a[] : memref<f64>
  %0 = memref.load %a[] : memref<f64>
  %1 = arith.addf %0, %0 : f64
  memref.store %1, %a[] : memref<f64>
  memref.store %y, %b[%c0] : memref<1xi32>
  %2 = memref.load %a[] : memref<f64>
  %3 = memref.load %b[%c0] : memref<1xi32>
  return %2, %3 : f64, i32
}

// durbin's `sum`: reset before the loop, accumulated in it, read after it: one iter_arg; the
// loop's own attributes are kept.
// CHECK-LABEL: func.func @sum_loop
// CHECK-NOT: memref.alloca
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT: %[[R:.*]] = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f64) {
// CHECK-NEXT: %[[V:.*]] = memref.load %{{.*}}[%[[I]]] : memref<40xf64>
// CHECK-NEXT: %[[T:.*]] = arith.addf %[[ACC]], %[[V]] : f64
// CHECK-NEXT: scf.yield %[[T]] : f64
// CHECK-NEXT: } {polyflow.tag = "kept"}
// CHECK-NEXT: return %[[R]] : f64
func.func @sum_loop(%r: memref<40xf64>, %n: index) -> f64 {
  %sum = memref.alloca() : memref<f64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  memref.store %zero, %sum[] : memref<f64>
  scf.for %i = %c0 to %n step %c1 {
    %s = memref.load %sum[] : memref<f64>
    %v = memref.load %r[%i] : memref<40xf64>
    %t = arith.addf %s, %v : f64
    memref.store %t, %sum[] : memref<f64>
  } {polyflow.tag = "kept"}
  %out = memref.load %sum[] : memref<f64>
  return %out : f64
}

// A temporary written then read in the same iteration, dead after the loop: no iter_args.
// CHECK-LABEL: func.func @iteration_local
// CHECK-NOT: memref.alloca
// CHECK: scf.for %[[I:[^ ]*]] = %{{[^ ]*}} to %{{[^ ]*}} step %{{[^ ]*}} {
// CHECK-NEXT: %[[V:.*]] = memref.load %{{.*}}[%[[I]]]
// CHECK-NEXT: %[[W:.*]] = arith.mulf %[[V]], %[[V]] : f64
// CHECK-NEXT: memref.store %[[W]], %{{.*}}[%[[I]]]
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @iteration_local(%A: memref<40xf64>, %n: index) {
  %t = memref.alloca() : memref<f64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %A[%i] : memref<40xf64>
    %w = arith.mulf %v, %v : f64
    memref.store %w, %t[] : memref<f64>
    %x = memref.load %t[] : memref<f64>
    memref.store %x, %A[%i] : memref<40xf64>
  }
  return
}

// Both branches store: the value leaves the if as a result.
// CHECK-LABEL: func.func @if_else
// CHECK-SAME: (%[[C:.*]]: i1, %[[X:.*]]: i32, %[[Y:.*]]: i32)
// CHECK-NEXT: %[[R:.*]] = scf.if %[[C]] -> (i32) {
// CHECK-NEXT: scf.yield %[[X]] : i32
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[Y]] : i32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : i32
func.func @if_else(%c: i1, %x: i32, %y: i32) -> i32 {
  %a = memref.alloca() : memref<i32>
  scf.if %c {
    memref.store %x, %a[] : memref<i32>
  } else {
    memref.store %y, %a[] : memref<i32>
  }
  %r = memref.load %a[] : memref<i32>
  return %r : i32
}

// No else: one is made, yielding the value from before the if.
// CHECK-LABEL: func.func @if_no_else
// CHECK-SAME: (%[[C:.*]]: i1, %[[X:.*]]: i32, %[[Y:.*]]: i32)
// CHECK-NEXT: %[[R:.*]] = scf.if %[[C]] -> (i32) {
// CHECK-NEXT: scf.yield %[[Y]] : i32
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[X]] : i32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : i32
func.func @if_no_else(%c: i1, %x: i32, %y: i32) -> i32 {
  %a = memref.alloca() : memref<i32>
  memref.store %x, %a[] : memref<i32>
  scf.if %c {
    memref.store %y, %a[] : memref<i32>
  }
  %r = memref.load %a[] : memref<i32>
  return %r : i32
}

// An if that already has a result keeps it, first.
// CHECK-LABEL: func.func @if_with_result
// CHECK-SAME: (%[[C:.*]]: i1, %[[X:.*]]: i32, %[[Y:.*]]: i32)
// CHECK-NEXT: %[[R:.*]]:2 = scf.if %[[C]] -> (i1, i32) {
// CHECK-NEXT: %[[T:.*]] = arith.constant true
// CHECK-NEXT: scf.yield %[[T]], %[[Y]] : i1, i32
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[F:.*]] = arith.constant false
// CHECK-NEXT: scf.yield %[[F]], %[[X]] : i1, i32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1 : i1, i32
func.func @if_with_result(%c: i1, %x: i32, %y: i32) -> (i1, i32) {
  %a = memref.alloca() : memref<i32>
  memref.store %x, %a[] : memref<i32>
  %b = scf.if %c -> i1 {
    memref.store %y, %a[] : memref<i32>
    %t = arith.constant true
    scf.yield %t : i1
  } else {
    %f = arith.constant false
    scf.yield %f : i1
  }
  %r = memref.load %a[] : memref<i32>
  return %b, %r : i1, i32
}

// Written in the if, dead after it: the if gets no result and no else.
// CHECK-LABEL: func.func @if_dead_after
// CHECK-SAME: (%[[C:.*]]: i1, %[[X:.*]]: i32, %[[A:.*]]: memref<4xi32>)
// CHECK: scf.if %[[C]] {
// CHECK-NEXT: memref.store %[[X]], %[[A]]
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @if_dead_after(%c: i1, %x: i32, %A: memref<4xi32>) {
  %a = memref.alloca() : memref<i32>
  %c0 = arith.constant 0 : index
  scf.if %c {
    memref.store %x, %a[] : memref<i32>
    %v = memref.load %a[] : memref<i32>
    memref.store %v, %A[%c0] : memref<4xi32>
  }
  return
}

// Nested loops: the outer one carries `beta`, the inner one `sum`, reset on every outer
// iteration (so the outer loop does not carry it).
// CHECK-LABEL: func.func @nested
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT: %[[OUT:.*]] = scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[BETA:.*]] = %[[ONE]]) -> (f64) {
// CHECK-NEXT: %[[SUM:.*]] = scf.for %{{.*}} = %{{.*}} to %[[K]] step %{{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f64) {
// CHECK-NEXT: memref.load
// CHECK-NEXT: %[[T:.*]] = arith.addf %[[ACC]]
// CHECK-NEXT: scf.yield %[[T]] : f64
// CHECK-NEXT: }
// CHECK-NEXT: %[[NB:.*]] = arith.mulf %[[BETA]], %[[SUM]] : f64
// CHECK-NEXT: scf.yield %[[NB]] : f64
// CHECK-NEXT: }
// CHECK-NEXT: return %[[OUT]] : f64
func.func @nested(%r: memref<40xf64>, %n: index) -> f64 {
  %beta = memref.alloca() : memref<f64>
  %sum = memref.alloca() : memref<f64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f64
  %zero = arith.constant 0.0 : f64
  memref.store %one, %beta[] : memref<f64>
  scf.for %k = %c1 to %n step %c1 {
    memref.store %zero, %sum[] : memref<f64>
    scf.for %i = %c0 to %k step %c1 {
      %s = memref.load %sum[] : memref<f64>
      %v = memref.load %r[%i] : memref<40xf64>
      %t = arith.addf %s, %v : f64
      memref.store %t, %sum[] : memref<f64>
    }
    %b = memref.load %beta[] : memref<f64>
    %s2 = memref.load %sum[] : memref<f64>
    %nb = arith.mulf %b, %s2 : f64
    memref.store %nb, %beta[] : memref<f64>
  }
  %out = memref.load %beta[] : memref<f64>
  return %out : f64
}

// An existing iter_arg is kept, first; a local only read in the loop is used directly.
// CHECK-LABEL: func.func @for_with_iter_args
// CHECK-SAME: (%{{.*}}: index, %[[X:.*]]: i32, %[[Y:.*]]: i32)
// CHECK: %[[R:.*]]:2 = scf.for %{{.*}} iter_args(%[[ACC:.*]] = %[[X]], %[[A:.*]] = %[[X]]) -> (i32, i32) {
// CHECK-NEXT: %[[W:.*]] = arith.addi %[[A]], %[[Y]] : i32
// CHECK-NEXT: %[[Z:.*]] = arith.addi %[[ACC]], %[[W]] : i32
// CHECK-NEXT: scf.yield %[[Z]], %[[W]] : i32, i32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1 : i32, i32
func.func @for_with_iter_args(%n: index, %x: i32, %y: i32) -> (i32, i32) {
  %a = memref.alloca() : memref<i32>
  %k = memref.alloca() : memref<i32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  memref.store %x, %a[] : memref<i32>
  memref.store %y, %k[] : memref<i32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> i32 {
    %v = memref.load %a[] : memref<i32>
    %kk = memref.load %k[] : memref<i32>
    %w = arith.addi %v, %kk : i32
    memref.store %w, %a[] : memref<i32>
    %z = arith.addi %acc, %w : i32
    scf.yield %z : i32
  }
  %out = memref.load %a[] : memref<i32>
  return %r, %out : i32, i32
}

// The frontend's loop with a break: the i8 flag and the counter go through the while's before
// and after arguments and the condition; the counter is read after the loop.
// CHECK-LABEL: func.func @while_break
// CHECK-NOT: memref.alloca
// CHECK: %[[C0_I8:.*]] = arith.constant 0 : i8
// CHECK-NEXT: %[[C1_I8:.*]] = arith.constant 1 : i8
// CHECK-NEXT: %[[W:.*]]:2 = scf.while (%[[BF:.*]] = %[[C0_I8]], %[[BI:.*]] = %{{.*}}) : (i8, i32) -> (i8, i32) {
// CHECK-NEXT: arith.trunci %[[BF]] : i8 to i1
// CHECK: arith.cmpi slt, %[[BI]], %{{.*}} : i32
// CHECK: scf.condition(%{{.*}}) %[[BF]], %[[BI]] : i8, i32
// CHECK-NEXT: } do {
// CHECK-NEXT: ^bb0(%[[AF:.*]]: i8, %[[AI:.*]]: i32):
// CHECK-NEXT: arith.index_cast %[[AI]] : i32 to index
// CHECK: %[[IF:.*]]:2 = scf.if %{{.*}} -> (i8, i32) {
// CHECK-NEXT: scf.yield %[[C1_I8]], %[[AI]] : i8, i32
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[AI]]
// CHECK-NEXT: scf.yield %[[AF]], %[[NEXT]] : i8, i32
// CHECK-NEXT: }
// CHECK-NEXT: scf.yield %[[IF]]#0, %[[IF]]#1 : i8, i32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[W]]#1 : i32
func.func @while_break(%A: memref<?xi32>, %n: i32) -> i32 {
  %brk = memref.alloca() : memref<i8>
  %i = memref.alloca() : memref<i32>
  %c0_i32 = arith.constant 0 : i32
  %c1_i32 = arith.constant 1 : i32
  %c0_i8 = arith.constant 0 : i8
  %c1_i8 = arith.constant 1 : i8
  memref.store %c0_i32, %i[] : memref<i32>
  memref.store %c0_i8, %brk[] : memref<i8>
  scf.while : () -> () {
    %f = memref.load %brk[] : memref<i8>
    %fb = arith.trunci %f : i8 to i1
    %true = arith.constant true
    %go = arith.xori %fb, %true : i1
    %iv = memref.load %i[] : memref<i32>
    %lt = arith.cmpi slt, %iv, %n : i32
    %cond = arith.andi %go, %lt : i1
    scf.condition(%cond)
  } do {
    %iv = memref.load %i[] : memref<i32>
    %idx = arith.index_cast %iv : i32 to index
    %v = memref.load %A[%idx] : memref<?xi32>
    %neg = arith.cmpi slt, %v, %c0_i32 : i32
    scf.if %neg {
      memref.store %c1_i8, %brk[] : memref<i8>
    } else {
      %next = arith.addi %iv, %c1_i32 : i32
      memref.store %next, %i[] : memref<i32>
    }
    scf.yield
  }
  %r = memref.load %i[] : memref<i32>
  return %r : i32
}

// Stored in the before region, read in the after region and after the loop: it goes through
// the condition only (nothing reads it at the before region's entry).
// CHECK-LABEL: func.func @while_before_to_after
// CHECK: %[[W:.*]]:2 = scf.while (%[[X:.*]] = %{{.*}}) : (i32) -> (i32, i32) {
// CHECK-NEXT: %[[Y:.*]] = arith.addi %[[X]]
// CHECK-NEXT: %[[LT:.*]] = arith.cmpi slt, %[[Y]]
// CHECK-NEXT: scf.condition(%[[LT]]) %[[Y]], %[[Y]] : i32, i32
// CHECK-NEXT: } do {
// CHECK-NEXT: ^bb0(%[[AX:.*]]: i32, %[[AA:.*]]: i32):
// CHECK-NEXT: %[[Z:.*]] = arith.addi %[[AA]], %[[AX]] : i32
// CHECK-NEXT: scf.yield %[[Z]] : i32
// CHECK-NEXT: }
// CHECK-NEXT: arith.addi %[[W]]#1, %[[W]]#0 : i32
func.func @while_before_to_after(%n: i32) -> i32 {
  %a = memref.alloca() : memref<i32>
  %c1_i32 = arith.constant 1 : i32
  %c0_i32 = arith.constant 0 : i32
  %w = scf.while (%x = %c0_i32) : (i32) -> i32 {
    %y = arith.addi %x, %c1_i32 : i32
    memref.store %y, %a[] : memref<i32>
    %lt = arith.cmpi slt, %y, %n : i32
    scf.condition(%lt) %y : i32
  } do {
  ^bb0(%x: i32):
    %t = memref.load %a[] : memref<i32>
    %z = arith.addi %t, %x : i32
    scf.yield %z : i32
  }
  %r = memref.load %a[] : memref<i32>
  %s = arith.addi %r, %w : i32
  return %s : i32
}

// A read that no store reaches (an uninitialized C local) reads poison.
// CHECK-LABEL: func.func @uninitialized
// CHECK-SAME: (%[[C:.*]]: i1, %[[X:.*]]: f32)
// CHECK-NEXT: %[[P:.*]] = ub.poison : f32
// CHECK-NEXT: %[[R:.*]] = scf.if %[[C]] -> (f32) {
// CHECK-NEXT: scf.yield %[[X]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[P]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : f32
func.func @uninitialized(%c: i1, %x: f32) -> f32 {
  %a = memref.alloca() : memref<f32>
  scf.if %c {
    memref.store %x, %a[] : memref<f32>
  }
  %r = memref.load %a[] : memref<f32>
  return %r : f32
}

// ---- left alone: every use must be a direct load/store, in scf.for/if/while only ----

func.func private @use(memref<f64>)

// CHECK-LABEL: func.func @passed_to_call
// CHECK-NEXT: %[[A:.*]] = memref.alloca() : memref<f64>
// CHECK-NEXT: memref.store %{{.*}}, %[[A]][] : memref<f64>
// CHECK-NEXT: call @use(%[[A]])
// CHECK-NEXT: memref.load %[[A]][] : memref<f64>
func.func @passed_to_call(%x: f64) -> f64 {
  %a = memref.alloca() : memref<f64>
  memref.store %x, %a[] : memref<f64>
  func.call @use(%a) : (memref<f64>) -> ()
  %r = memref.load %a[] : memref<f64>
  return %r : f64
}

// CHECK-LABEL: func.func @stored_as_value
// CHECK-NEXT: %[[A:.*]] = memref.alloca() : memref<f64>
// CHECK-NEXT: memref.store %{{.*}}, %[[A]][] : memref<f64>
// CHECK-NEXT: memref.store %[[A]], %{{.*}}[] : memref<memref<f64>>
// CHECK-NEXT: memref.load %[[A]][] : memref<f64>
func.func @stored_as_value(%x: f64, %m: memref<memref<f64>>) -> f64 {
  %a = memref.alloca() : memref<f64>
  memref.store %x, %a[] : memref<f64>
  memref.store %a, %m[] : memref<memref<f64>>
  %r = memref.load %a[] : memref<f64>
  return %r : f64
}

// CHECK-LABEL: func.func @cast
// CHECK-NEXT: %[[A:.*]] = memref.alloca() : memref<1xf64>
// CHECK: memref.store %{{.*}}, %[[A]][%{{.*}}] : memref<1xf64>
// CHECK-NEXT: memref.cast %[[A]]
func.func @cast(%x: f64) -> f64 {
  %a = memref.alloca() : memref<1xf64>
  %c0 = arith.constant 0 : index
  memref.store %x, %a[%c0] : memref<1xf64>
  %u = memref.cast %a : memref<1xf64> to memref<?xf64>
  %r = memref.load %u[%c0] : memref<?xf64>
  return %r : f64
}

// CHECK-LABEL: func.func @two_elements
// CHECK-NEXT: %[[A:.*]] = memref.alloca() : memref<2xf64>
// CHECK: memref.store %{{.*}}, %[[A]][%{{.*}}] : memref<2xf64>
// CHECK-NEXT: memref.store %{{.*}}, %[[A]][%{{.*}}] : memref<2xf64>
// CHECK-NEXT: memref.load %[[A]][%{{.*}}] : memref<2xf64>
func.func @two_elements(%x: f64) -> f64 {
  %a = memref.alloca() : memref<2xf64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  memref.store %x, %a[%c0] : memref<2xf64>
  memref.store %x, %a[%c1] : memref<2xf64>
  %r = memref.load %a[%c0] : memref<2xf64>
  return %r : f64
}

// CHECK-LABEL: func.func @variable_index
// CHECK-SAME: (%{{.*}}: f64, %[[I:.*]]: index)
// CHECK-NEXT: %[[A:.*]] = memref.alloca() : memref<1xf64>
// CHECK-NEXT: memref.store %{{.*}}, %[[A]][%[[I]]] : memref<1xf64>
// CHECK-NEXT: memref.load %[[A]][%[[I]]] : memref<1xf64>
func.func @variable_index(%x: f64, %i: index) -> f64 {
  %a = memref.alloca() : memref<1xf64>
  memref.store %x, %a[%i] : memref<1xf64>
  %r = memref.load %a[%i] : memref<1xf64>
  return %r : f64
}

// Accessed inside scf.execute_region: stays in memory; the plain local next to it is promoted.
// CHECK-LABEL: func.func @in_execute_region
// CHECK-SAME: (%[[X:.*]]: f64)
// CHECK-NEXT: %[[A:.*]] = memref.alloca() : memref<f64>
// CHECK-NEXT: memref.store %[[X]], %[[A]][] : memref<f64>
// CHECK-NEXT: scf.execute_region {
// CHECK-NEXT: memref.load %[[A]][]
// CHECK: %[[R:.*]] = memref.load %[[A]][] : memref<f64>
// CHECK-NEXT: arith.addf %[[R]], %[[X]] : f64
func.func @in_execute_region(%x: f64) -> f64 {
  %a = memref.alloca() : memref<f64>
  %b = memref.alloca() : memref<f64>
  memref.store %x, %a[] : memref<f64>
  memref.store %x, %b[] : memref<f64>
  scf.execute_region {
    %v = memref.load %a[] : memref<f64>
    %w = arith.addf %v, %v : f64
    memref.store %w, %a[] : memref<f64>
    scf.yield
  }
  %r = memref.load %a[] : memref<f64>
  %s = memref.load %b[] : memref<f64>
  %t = arith.addf %r, %s : f64
  return %t : f64
}

// CHECK-LABEL: func.func @in_parallel
// CHECK-NEXT: %[[A:.*]] = memref.alloca() : memref<f64>
// CHECK: scf.parallel
// CHECK-NEXT: memref.load
// CHECK-NEXT: memref.store %{{.*}}, %[[A]][] : memref<f64>
// CHECK-NEXT: memref.load %[[A]][] : memref<f64>
func.func @in_parallel(%n: index, %A: memref<?xf64>) {
  %a = memref.alloca() : memref<f64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %A[%i] : memref<?xf64>
    memref.store %v, %a[] : memref<f64>
    %w = memref.load %a[] : memref<f64>
    memref.store %w, %A[%i] : memref<?xf64>
    scf.reduce
  }
  return
}

// The rebuilt loop and if keep their locations.
// LOC-LABEL: func.func @locations
// LOC: scf.for {{.*}} iter_args
// LOC: scf.if {{.*}} -> (f64) {
// LOC: } loc([[IF:#loc[0-9]+]])
// LOC: } loc([[FOR:#loc[0-9]+]])
// LOC-DAG: [[FOR]] = loc("t.c":4:5)
// LOC-DAG: [[IF]] = loc("t.c":5:7)
func.func @locations(%n: index, %c: i1) -> f64 {
  %a = memref.alloca() : memref<f64> loc("t.c":2:3)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  memref.store %zero, %a[] : memref<f64>
  scf.for %i = %c0 to %n step %c1 {
    scf.if %c {
      %v = memref.load %a[] : memref<f64>
      %w = arith.addf %v, %v : f64
      memref.store %w, %a[] : memref<f64>
    } loc("t.c":5:7)
  } loc("t.c":4:5)
  %r = memref.load %a[] : memref<f64>
  return %r : f64
}
