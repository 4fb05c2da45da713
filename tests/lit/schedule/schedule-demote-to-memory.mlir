// schedule-demote-to-memory: values an affine region carries across iterations, branches or
// statements → memory, so that every statement is a store plus its backward slice.
// RUN: polyflow-opt --pass 'schedule-demote-to-memory' %s | filecheck %s
// RUN: polyflow-opt --pass 'schedule-demote-to-memory{expand=false}' %s | filecheck %s --check-prefix=FLAT

// An iter_args reduction whose result is stored to y[i] right after the loop accumulates in
// y[i] itself (raise-reductions undone): no scratchpad, and the init's load goes.
// CHECK-LABEL: func.func @reduce_into_element
// CHECK-NOT:  memref.alloc
// CHECK:      affine.for %[[I:.*]] = 0 to 64 {
// CHECK-NEXT:   affine.for %[[J:.*]] = 0 to 64 {
// CHECK-NEXT:     %[[A:.*]] = affine.load %arg0[%[[I]], %[[J]]] : memref<64x64xf64>
// CHECK-NEXT:     %[[X:.*]] = affine.load %arg1[%[[J]]] : memref<64xf64>
// CHECK-NEXT:     %[[P:.*]] = arith.mulf %[[A]], %[[X]] : f64
// CHECK-NEXT:     %[[Y:.*]] = affine.load %arg2[%[[I]]] : memref<64xf64>
// CHECK-NEXT:     %[[S:.*]] = arith.addf %[[Y]], %[[P]] : f64
// CHECK-NEXT:     affine.store %[[S]], %arg2[%[[I]]] : memref<64xf64>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: return
// FLAT-LABEL: func.func @reduce_into_element
// FLAT-NOT:   memref.alloc
// FLAT:       affine.store {{.*}}, %arg2[{{.*}}] : memref<64xf64>
// FLAT-NEXT:  }
func.func @reduce_into_element(%A: memref<64x64xf64>, %x: memref<64xf64>, %y: memref<64xf64>) {
  affine.for %i = 0 to 64 {
    %init = affine.load %y[%i] : memref<64xf64>
    %r = affine.for %j = 0 to 64 iter_args(%acc = %init) -> (f64) {
      %a = affine.load %A[%i, %j] : memref<64x64xf64>
      %b = affine.load %x[%j] : memref<64xf64>
      %p = arith.mulf %a, %b : f64
      %s = arith.addf %acc, %p : f64
      affine.yield %s : f64
    }
    affine.store %r, %y[%i] : memref<64xf64>
  }
  return
}

// A recurrence along j, restarted for every i: with expand, one element per iteration of the
// i loop (a heap scratchpad of its trip count around the region, freed after it); without,
// one 0-d scratchpad at the function entry.
// CHECK-LABEL: func.func @recurrence
// CHECK:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT: %[[N:.*]] = affine.apply #{{.*}}()[%arg0]
// CHECK-NEXT: %[[SIZE:.*]] = affine.max #{{.*}}(%[[N]])
// CHECK-NEXT: %[[BUF:.*]] = memref.alloc(%[[SIZE]]) : memref<?xf64>
// CHECK-NEXT: affine.for %[[I:.*]] = 0 to %arg0 {
// CHECK-NEXT:   affine.store %[[ZERO]], %[[BUF]][%[[I]]] : memref<?xf64>
// CHECK-NEXT:   affine.for %[[J:.*]] = 0 to 64 {
// CHECK-NEXT:     %[[A:.*]] = affine.load %arg1[%[[I]], %[[J]]] : memref<?x64xf64>
// CHECK-NEXT:     %[[PREV:.*]] = affine.load %[[BUF]][%[[I]]] : memref<?xf64>
// CHECK-NEXT:     %[[S:.*]] = arith.addf %[[PREV]], %[[A]] : f64
// CHECK-NEXT:     affine.store %[[S]], %arg2[%[[I]], %[[J]]] : memref<?x64xf64>
// CHECK-NEXT:     affine.store %[[S]], %[[BUF]][%[[I]]] : memref<?xf64>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: memref.dealloc %[[BUF]] : memref<?xf64>
// CHECK-NEXT: return
// FLAT-LABEL: func.func @recurrence
// FLAT-NEXT:  %[[BUF:.*]] = memref.alloca() : memref<f64>
// FLAT-NEXT:  %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// FLAT-NEXT:  affine.for %[[I:.*]] = 0 to %arg0 {
// FLAT-NEXT:    affine.store %[[ZERO]], %[[BUF]][] : memref<f64>
// FLAT-NEXT:    affine.for %[[J:.*]] = 0 to 64 {
// FLAT-NEXT:      %[[A:.*]] = affine.load %arg1[%[[I]], %[[J]]] : memref<?x64xf64>
// FLAT-NEXT:      %[[PREV:.*]] = affine.load %[[BUF]][] : memref<f64>
// FLAT-NEXT:      %[[S:.*]] = arith.addf %[[PREV]], %[[A]] : f64
// FLAT-NEXT:      affine.store %[[S]], %arg2[%[[I]], %[[J]]] : memref<?x64xf64>
// FLAT-NEXT:      affine.store %[[S]], %[[BUF]][] : memref<f64>
// FLAT-NEXT:    }
// FLAT-NEXT:  }
// FLAT-NOT:   memref.dealloc
// FLAT:       return
func.func @recurrence(%n: index, %A: memref<?x64xf64>, %B: memref<?x64xf64>) {
  %zero = arith.constant 0.0 : f64
  affine.for %i = 0 to %n {
    %r = affine.for %j = 0 to 64 iter_args(%prev = %zero) -> (f64) {
      %a = affine.load %A[%i, %j] : memref<?x64xf64>
      %s = arith.addf %prev, %a : f64
      affine.store %s, %B[%i, %j] : memref<?x64xf64>
      affine.yield %s : f64
    }
  }
  return
}

// An affine.if result: a 0-d scratchpad at the function entry, stored in both branches, read
// where the result was used.
// CHECK-LABEL: func.func @select
// CHECK-NEXT: %[[BUF:.*]] = memref.alloca() : memref<f64>
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT: affine.for %[[I:.*]] = 0 to 64 {
// CHECK-NEXT:   affine.if #{{.*}}(%[[I]]) {
// CHECK-NEXT:     %[[A:.*]] = affine.load %arg0[%[[I]]] : memref<64xf64>
// CHECK-NEXT:     affine.store %[[A]], %[[BUF]][] : memref<f64>
// CHECK-NEXT:   } else {
// CHECK-NEXT:     affine.store %[[ZERO]], %[[BUF]][] : memref<f64>
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[V:.*]] = affine.load %[[BUF]][] : memref<f64>
// CHECK-NEXT:   affine.store %[[V]], %arg1[%[[I]]] : memref<64xf64>
// CHECK-NEXT: }
// CHECK-NEXT: return
// FLAT-LABEL: func.func @select
// FLAT-NEXT:  memref.alloca() : memref<f64>
func.func @select(%A: memref<64xf64>, %B: memref<64xf64>) {
  %zero = arith.constant 0.0 : f64
  affine.for %i = 0 to 64 {
    %v = affine.if affine_set<(d0) : (d0 - 32 >= 0)>(%i) -> f64 {
      %a = affine.load %A[%i] : memref<64xf64>
      affine.yield %a : f64
    } else {
      affine.yield %zero : f64
    }
    affine.store %v, %B[%i] : memref<64xf64>
  }
  return
}

// An i1 lives in an i8 scratchpad (LLVM stores whole bytes).
// CHECK-LABEL: func.func @flag
// CHECK-NEXT: %[[BUF:.*]] = memref.alloca() : memref<i8>
// CHECK:      affine.if
// CHECK-NEXT:   %[[W:.*]] = arith.extui %true : i1 to i8
// CHECK-NEXT:   affine.store %[[W]], %[[BUF]][] : memref<i8>
// CHECK:      %[[B:.*]] = affine.load %[[BUF]][] : memref<i8>
// CHECK-NEXT: %[[V:.*]] = arith.trunci %[[B]] : i8 to i1
// CHECK-NEXT: affine.store %[[V]], %arg0[%{{.*}}] : memref<64xi1>
func.func @flag(%B: memref<64xi1>) {
  %t = arith.constant true
  %f = arith.constant false
  affine.for %i = 0 to 64 {
    %v = affine.if affine_set<(d0) : (d0 - 32 >= 0)>(%i) -> i1 {
      affine.yield %t : i1
    } else {
      affine.yield %f : i1
    }
    affine.store %v, %B[%i] : memref<64xi1>
  }
  return
}

// A loop with a call in it is no region: it keeps its iter_args.
// CHECK-LABEL: func.func @not_a_region
// CHECK-NOT:  memref.alloc
// CHECK:      affine.for {{.*}} iter_args
// CHECK:      func.call @touch
// CHECK:      return
func.func private @touch(f64)
func.func @not_a_region(%A: memref<64xf64>, %y: memref<1xf64>) {
  %zero = arith.constant 0.0 : f64
  %r = affine.for %i = 0 to 64 iter_args(%acc = %zero) -> (f64) {
    %a = affine.load %A[%i] : memref<64xf64>
    func.call @touch(%a) : (f64) -> ()
    %s = arith.addf %acc, %a : f64
    affine.yield %s : f64
  }
  affine.store %r, %y[0] : memref<1xf64>
  return
}
