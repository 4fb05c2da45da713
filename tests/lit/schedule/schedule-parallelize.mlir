// schedule-parallelize: affine.for without loop-carried dependences → affine.parallel, outermost
// first, never nested; reductions → reduce; small or aliasing loops stay sequential.
// RUN: polyflow-opt --pass 'schedule-parallelize{reassociate=true min_work=0}' %s | filecheck %s
// RUN: polyflow-opt --pass 'schedule-parallelize{min_work=0}' %s | filecheck %s --check-prefix=STRICT
// RUN: polyflow-opt --pass 'schedule-parallelize{parallel_reductions=false min_work=0}' %s | filecheck %s --check-prefix=NORED
// RUN: polyflow-opt --pass 'schedule-parallelize{min_trip=2 min_work=0}' %s | filecheck %s --check-prefix=TRIP2
// RUN: polyflow-opt --pass 'schedule-parallelize{min_work=0},schedule-parallelize{min_work=0}' %s | filecheck %s --check-prefix=TWICE
// RUN: polyflow-opt --pass 'schedule-parallelize{reassociate=true}' %s | filecheck %s --check-prefix=SMALL
// min_work=0: the loops here are small, and a nest of fewer than MIN_PARALLEL_WORK innermost
// iterations stays sequential by default (SMALL).

// The outer loop is parallel; the inner ones stay sequential (one level of parallelism).
// CHECK-LABEL: func.func @outer
// CHECK:      affine.parallel (%[[I:.*]]) = (0) to (symbol(%arg0)) {
// CHECK-NEXT:   affine.for %[[J:.*]] = 0 to 64 {
// CHECK-NEXT:     affine.load %arg1[%[[I]], %[[J]]]
// CHECK-NEXT:     arith.mulf
// CHECK-NEXT:     affine.store {{.*}}, %arg1[%[[I]], %[[J]]]
// CHECK-NEXT:   }
// CHECK-NEXT:   affine.for %{{.*}} = 0 to 64 {
// CHECK-NEXT:     affine.for %{{.*}} = 0 to 64 {
// CHECK:      return
// TWICE-LABEL: func.func @outer
// TWICE:      affine.parallel
// TWICE-NEXT:   affine.for
// TWICE-NOT:  affine.parallel
// TWICE:      return
func.func @outer(%n: index, %C: memref<?x64xf64>, %A: memref<?x64xf64>, %B: memref<64x64xf64>, %beta: f64) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to 64 {
      %c = affine.load %C[%i, %j] : memref<?x64xf64>
      %s = arith.mulf %c, %beta : f64
      affine.store %s, %C[%i, %j] : memref<?x64xf64>
    }
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to 64 {
        %c = affine.load %C[%i, %j] : memref<?x64xf64>
        %a = affine.load %A[%i, %k] : memref<?x64xf64>
        %b = affine.load %B[%k, %j] : memref<64x64xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %c, %p : f64
        affine.store %s, %C[%i, %j] : memref<?x64xf64>
      }
    }
  }
  return
}

// A float sum: reduce ("addf") whose body yields the iteration's term; the initial value is
// added after the loop (with reassociate: C's order otherwise). Without parallel_reductions
// it stays sequential.
// CHECK-LABEL: func.func @sum
// CHECK:      %[[INIT:.*]] = affine.load %arg1[0]
// CHECK-NEXT: %[[R:.*]] = affine.parallel (%[[I:.*]]) = (0) to (100) reduce ("addf") -> (f64) {
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant -0.000000e+00 : f64
// CHECK-NEXT:   %[[A:.*]] = affine.load %arg0[%[[I]]]
// CHECK-NEXT:   %[[S:.*]] = arith.addf %[[ZERO]], %[[A]] : f64
// CHECK-NEXT:   affine.yield %[[S]] : f64
// CHECK-NEXT: }
// CHECK-NEXT: %[[T:.*]] = arith.addf %[[INIT]], %[[R]] : f64
// CHECK-NEXT: affine.store %[[T]], %arg1[0]
// NORED-LABEL: func.func @sum
// NORED-NOT:  affine.parallel
// NORED:      affine.for {{.*}} iter_args
// NORED:      return
// Without reassociate (C's floating-point semantics) the sum keeps its order: sequential, and
// no reassoc flag.
// STRICT-LABEL: func.func @sum
// STRICT-NOT:  affine.parallel
// STRICT-NOT:  reassoc
// STRICT:      affine.for {{.*}} iter_args
// STRICT-NOT:  reassoc
// STRICT:      return
// SMALL-LABEL: func.func @sum
// SMALL-NOT:  affine.parallel
// SMALL:      affine.for {{.*}} iter_args
// SMALL:      return
func.func @sum(%A: memref<100xf64>, %out: memref<1xf64>) {
  %init = affine.load %out[0] : memref<1xf64>
  %r = affine.for %i = 0 to 100 iter_args(%acc = %init) -> (f64) {
    %a = affine.load %A[%i] : memref<100xf64>
    %s = arith.addf %acc, %a : f64
    affine.yield %s : f64
  } {polyflow.reductions = ["add"]}
  affine.store %r, %out[0] : memref<1xf64>
  return
}

// Matrix-vector product: the outer loop is parallel, the reduction inside it stays sequential.
// CHECK-LABEL: func.func @matvec
// CHECK:      affine.parallel
// CHECK:        affine.for {{.*}} iter_args
// CHECK:        } {polyflow.reassociated = ["addf"], polyflow.reductions = ["add"]}
func.func @matvec(%A: memref<32x32xf64>, %x: memref<32xf64>, %y: memref<32xf64>) {
  affine.for %i = 0 to 32 {
    %init = affine.load %y[%i] : memref<32xf64>
    %r = affine.for %j = 0 to 32 iter_args(%acc = %init) -> (f64) {
      %a = affine.load %A[%i, %j] : memref<32x32xf64>
      %b = affine.load %x[%j] : memref<32xf64>
      %p = arith.mulf %a, %b : f64
      %s = arith.addf %acc, %p : f64
      affine.yield %s : f64
    } {polyflow.reductions = ["add"]}
    affine.store %r, %y[%i] : memref<32xf64>
  }
  return
}

// Integer reductions reorder exactly: parallel even without parallel_reductions; a chain of
// subtractions is an add reduction of the negated terms.
// CHECK-LABEL: func.func @int_sum
// CHECK:      affine.parallel (%{{.*}}) = (0) to (symbol(%arg1)) reduce ("addi") -> (i32)
// CHECK-NEXT:   arith.constant 0 : i32
// CHECK:        arith.subi
// CHECK:        arith.subi
// CHECK:      arith.addi %c7_i32, %{{.*}} : i32
// Integer sums are exact in any order: parallel without reassociate, not without
// parallel_reductions.
// STRICT-LABEL: func.func @int_sum
// STRICT:      affine.parallel {{.*}} reduce ("addi")
// NORED-LABEL: func.func @int_sum
// NORED-NOT:  affine.parallel
// NORED:      affine.for {{.*}} iter_args
// NORED:      return
func.func @int_sum(%A: memref<?xi32>, %n: index) -> i32 {
  %c7 = arith.constant 7 : i32
  %r = affine.for %i = 0 to %n iter_args(%acc = %c7) -> (i32) {
    %a = affine.load %A[%i] : memref<?xi32>
    %b = affine.load %A[%i + 1] : memref<?xi32>
    %s = arith.subi %acc, %a : i32
    %t = arith.subi %s, %b : i32
    affine.yield %t : i32
  } {polyflow.reductions = ["add"]}
  return %r : i32
}

// Reductions the OpenMP lowering cannot take (integer max) and values carried without being a
// reduction stay sequential.
// CHECK-LABEL: func.func @max_and_carried
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @max_and_carried(%A: memref<100xi32>) -> (i32, i32) {
  %c0 = arith.constant 0 : i32
  %m = affine.for %i = 0 to 100 iter_args(%acc = %c0) -> (i32) {
    %a = affine.load %A[%i] : memref<100xi32>
    %s = arith.maxsi %acc, %a : i32
    affine.yield %s : i32
  } {polyflow.reductions = ["max"]}
  %p = affine.for %i = 0 to 100 iter_args(%acc = %c0) -> (i32) {
    %a = affine.load %A[%i] : memref<100xi32>
    %s = arith.muli %acc, %a : i32
    %t = arith.addi %s, %a : i32
    affine.yield %t : i32
  } {polyflow.reductions = ["none"]}
  return %m, %p : i32, i32
}

// A dependence carried by the outer loop: it stays sequential, the loop inside it is parallel.
// CHECK-LABEL: func.func @carried_outer
// CHECK:      affine.for %[[T:.*]] = 1 to 100 {
// CHECK-NEXT:   affine.parallel (%[[J:.*]]) = (0) to (100) {
// CHECK-NEXT:     affine.for %[[K:.*]] = 0 to 100 {
// CHECK-NEXT:       affine.load %arg0[%[[T]] - 1, %[[J]], %[[K]]]
// CHECK:        }
// CHECK-NEXT: }
func.func @carried_outer(%A: memref<100x100x100xf32>) {
  affine.for %t = 1 to 100 {
    affine.for %j = 0 to 100 {
      affine.for %k = 0 to 100 {
        %a = affine.load %A[%t - 1, %j, %k] : memref<100x100x100xf32>
        %s = arith.addf %a, %a : f32
        affine.store %s, %A[%t, %j, %k] : memref<100x100x100xf32>
      }
    }
  }
  return
}

// An innermost loop inside a sequential loop of more than 64 iterations stays sequential: a
// fork/join per outer iteration would cost more than one loop's work (@small_trip: 4 is fine).
// CHECK-LABEL: func.func @innermost_under_sequential
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @innermost_under_sequential(%A: memref<100x100xf32>) {
  affine.for %t = 1 to 100 {
    affine.for %j = 0 to 100 {
      %a = affine.load %A[%t - 1, %j] : memref<100x100xf32>
      %s = arith.addf %a, %a : f32
      affine.store %s, %A[%t, %j] : memref<100x100xf32>
    }
  }
  return
}

// A loop carrying a dependence through memory at its own level stays affine.for.
// CHECK-LABEL: func.func @recurrence
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @recurrence(%A: memref<100xf32>) {
  affine.for %i = 1 to 100 {
    %a = affine.load %A[%i - 1] : memref<100xf32>
    %s = arith.addf %a, %a : f32
    affine.store %s, %A[%i] : memref<100xf32>
  }
  return
}

// A scalar scratchpad written by every iteration (a WAW dependence) keeps the loop sequential.
// CHECK-LABEL: func.func @scratchpad
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @scratchpad(%A: memref<100xf32>) {
  %t = memref.alloca() : memref<f32>
  affine.for %i = 0 to 100 {
    %a = affine.load %A[%i] : memref<100xf32>
    affine.store %a, %t[] : memref<f32>
    %b = affine.load %t[] : memref<f32>
    affine.store %b, %A[%i] : memref<100xf32>
  }
  return
}

// Too few iterations: the outer loop (4 iterations) stays, the inner loop is parallel.
// With min_trip=2 the outer loop is the parallel one.
// CHECK-LABEL: func.func @small_trip
// CHECK:      affine.for %{{.*}} = 0 to 4 {
// CHECK-NEXT:   affine.parallel (%{{.*}}) = (0) to (1000) {
// TRIP2-LABEL: func.func @small_trip
// TRIP2:      affine.parallel (%{{.*}}) = (0) to (4) {
// TRIP2-NEXT:   affine.for %{{.*}} = 0 to 1000 {
func.func @small_trip(%A: memref<4x1000xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 1000 {
      %a = affine.load %A[%i, %j] : memref<4x1000xf32>
      %s = arith.addf %a, %a : f32
      affine.store %s, %A[%i, %j] : memref<4x1000xf32>
    }
  }
  return
}

// A C pointer argument may alias the other array of its element type: a loop writing through
// one and reading the other stays sequential. With different element types it is parallel.
// CHECK-LABEL: func.func @unknown_extent
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @unknown_extent(%A: memref<?xf64> {polyflow.unknown_extent}, %B: memref<100xf64>) {
  affine.for %i = 0 to 100 {
    %b = affine.load %B[%i] : memref<100xf64>
    affine.store %b, %A[%i + 1] : memref<?xf64>
  }
  return
}
// CHECK-LABEL: func.func @unknown_extent_other_type
// CHECK:      affine.parallel
func.func @unknown_extent_other_type(%A: memref<?xf64> {polyflow.unknown_extent}, %B: memref<100xi32>) {
  affine.for %i = 0 to 100 {
    %b = affine.load %B[%i] : memref<100xi32>
    %f = arith.sitofp %b : i32 to f64
    affine.store %f, %A[%i] : memref<?xf64>
  }
  return
}

// A call may do anything: the loop stays sequential.
// CHECK-LABEL: func.func @with_call
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func private @effect(index)
func.func @with_call() {
  affine.for %i = 0 to 100 {
    func.call @effect(%i) : (index) -> ()
  }
  return
}

// Guards and steps are kept: a parallel loop with step 2 around an affine.if.
// CHECK-LABEL: func.func @step_and_if
// CHECK:      affine.parallel (%{{.*}}) = (0) to (100) step (2) {
// CHECK-NEXT:   affine.if
func.func @step_and_if(%A: memref<100xf32>, %n: index) {
  affine.for %i = 0 to 100 step 2 {
    affine.if affine_set<(d0)[s0] : (s0 - d0 - 1 >= 0)>(%i)[%n] {
      %a = affine.load %A[%i] : memref<100xf32>
      %s = arith.addf %a, %a : f32
      affine.store %s, %A[%i] : memref<100xf32>
    }
  }
  return
}

// Nothing to do: crash-free on loops with no memory accesses and empty functions.
// CHECK-LABEL: func.func @empty
func.func @empty() {
  affine.for %i = 0 to 10 {
  }
  return
}

// A view made in the loop addresses other memory in each iteration (here v[0] is A[i], which
// iteration i - 1 reads): the loop stays sequential. A view made outside is one array.
// CHECK-LABEL: func.func @view_in_loop
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @view_in_loop(%A: memref<101xf32>) {
  affine.for %i = 0 to 100 {
    %v = memref.subview %A[%i] [1] [1] : memref<101xf32> to memref<1xf32, strided<[1], offset: ?>>
    %a = affine.load %A[%i + 1] : memref<101xf32>
    affine.store %a, %v[0] : memref<1xf32, strided<[1], offset: ?>>
  }
  return
}
// CHECK-LABEL: func.func @view_outside
// CHECK:      affine.parallel
func.func @view_outside(%A: memref<10x10xf32>) {
  %v = memref.subview %A[0, 0] [10, 10] [1, 1] : memref<10x10xf32> to memref<10x10xf32, strided<[10, 1]>>
  affine.for %i = 0 to 10 {
    %a = affine.load %v[%i, 0] : memref<10x10xf32, strided<[10, 1]>>
    affine.store %a, %v[%i, 1] : memref<10x10xf32, strided<[10, 1]>>
  }
  return
}
// A view and its array, both accessed with a write: they may overlap, so it stays sequential.
// CHECK-LABEL: func.func @view_and_array
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @view_and_array(%A: memref<100xf32>) {
  %v = memref.subview %A[1] [99] [1] : memref<100xf32> to memref<99xf32, strided<[1], offset: 1>>
  affine.for %i = 0 to 99 {
    %a = affine.load %A[%i] : memref<100xf32>
    affine.store %a, %v[%i] : memref<99xf32, strided<[1], offset: 1>>
  }
  return
}

// A float reduction left in a sequential loop may still be reordered: its update gets `reassoc`
// (LLVM then vectorizes it with partial sums) and the loop is marked. Not without
// parallel_reductions; integer reductions need no flag.
// CHECK-LABEL: func.func @sequential_float_reduction
// CHECK:      affine.for %{{.*}} = 1 to 100 {
// CHECK:        affine.for %{{.*}} = 0 to 100 iter_args
// CHECK:          arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : f64
// CHECK:        } {polyflow.reassociated = ["addf"], polyflow.reductions = ["add"]}
// NORED-LABEL: func.func @sequential_float_reduction
// NORED-NOT:  reassoc
// NORED:      return
func.func @sequential_float_reduction(%A: memref<100x100xf64>, %out: memref<100xf64>) {
  affine.for %i = 1 to 100 {
    %init = affine.load %out[%i - 1] : memref<100xf64>
    %r = affine.for %j = 0 to 100 iter_args(%acc = %init) -> (f64) {
      %a = affine.load %A[%i, %j] : memref<100x100xf64>
      %s = arith.addf %acc, %a : f64
      affine.yield %s : f64
    } {polyflow.reductions = ["add"]}
    affine.store %r, %out[%i] : memref<100xf64>
  }
  return
}

// A loop in (or around) the else region of an affine.if stays sequential: upstream's dependence
// analysis applies the if's condition there too (lu's tiled k loop came out parallel and wrong).
// CHECK-LABEL: func.func @in_else_region
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @in_else_region(%A: memref<100xf64>, %n: index) {
  affine.if affine_set<()[s0] : (s0 - 50 >= 0)>()[%n] {
    %z = arith.constant 0.0 : f64
    affine.store %z, %A[0] : memref<100xf64>
  } else {
    affine.for %i = 0 to 100 {
      %a = affine.load %A[%i] : memref<100xf64>
      %s = arith.addf %a, %a : f64
      affine.store %s, %A[%i] : memref<100xf64>
    }
  }
  return
}

// A wavefront's parallel tile loop (codegen marks it independent after isl showed it carries no
// dependence, and a wavefront) is parallel on that word, where upstream's analysis finds a
// dependence (here one across tiles, which the marks assert away); unmarked, or with a call
// inside, it stays sequential.
// CHECK-LABEL: func.func @wavefront_tile_loop
// CHECK:      affine.parallel (%{{.*}}) = (0) to (symbol(%arg0)) step (32) {
// CHECK-NEXT:   affine.for %{{.*}} = 0 to 32 {
// CHECK-LABEL: func.func @untagged_tile_loop
// CHECK-NOT:  affine.parallel
// CHECK:      return
// CHECK-LABEL: func.func @wavefront_tile_loop_with_call
// CHECK-NOT:  affine.parallel
// CHECK:      return
func.func @wavefront_tile_loop(%n: index, %A: memref<?xf64>) {
  affine.for %t = 0 to %n step 32 {
    affine.for %i = 0 to 32 {
      %x = affine.load %A[%t + %i] : memref<?xf64>
      affine.store %x, %A[%t + %i + 1] : memref<?xf64>
    }
  } {polyflow.independent, polyflow.wavefront}
  return
}
func.func @untagged_tile_loop(%n: index, %A: memref<?xf64>) {
  affine.for %t = 0 to %n step 32 {
    affine.for %i = 0 to 32 {
      %x = affine.load %A[%t + %i] : memref<?xf64>
      affine.store %x, %A[%t + %i + 1] : memref<?xf64>
    }
  }
  return
}
func.func private @observe(f64)
func.func @wavefront_tile_loop_with_call(%n: index, %A: memref<?xf64>) {
  affine.for %t = 0 to %n step 32 {
    affine.for %i = 0 to 32 {
      %x = affine.load %A[%t + %i] : memref<?xf64>
      func.call @observe(%x) : (f64) -> ()
      affine.store %x, %A[%t + %i + 1] : memref<?xf64>
    }
  } {polyflow.independent, polyflow.wavefront}
  return
}

// A nest of at most 32x31 iterations whatever the outer loop does (a tile's point loops) inside a
// long sequential loop stays sequential: a fork and join per outer iteration costs more than it
// saves (checked with the default min_work). With a loop over %n inside, the work pays for it.
// SMALL-LABEL: func.func @small_nest_in_long_loop
// SMALL-NOT:  affine.parallel
// SMALL:      return
// CHECK-LABEL: func.func @large_nest_in_long_loop
// CHECK:      affine.for %{{.*}} = 0 to %arg0 {
// CHECK-NEXT:   affine.parallel (%{{.*}}) = (0) to (32) {
// CHECK-NEXT:     affine.for %{{.*}} = 1 to %arg0 {
func.func @small_nest_in_long_loop(%n: index, %A: memref<32x32xf64>) {
  %one = arith.constant 1.0 : f64
  affine.for %k = 0 to %n {
    affine.for %i = 0 to 32 {
      affine.for %j = 1 to 32 {
        %x = affine.load %A[%i, %j - 1] : memref<32x32xf64>
        %y = arith.addf %x, %one : f64
        affine.store %y, %A[%i, %j] : memref<32x32xf64>
      }
    }
  }
  return
}
func.func @large_nest_in_long_loop(%n: index, %A: memref<32x?xf64>) {
  %one = arith.constant 1.0 : f64
  affine.for %k = 0 to %n {
    affine.for %i = 0 to 32 {
      affine.for %j = 1 to %n {
        %x = affine.load %A[%i, %j - 1] : memref<32x?xf64>
        %y = arith.addf %x, %one : f64
        affine.store %y, %A[%i, %j] : memref<32x?xf64>
      }
    }
  }
  return
}
