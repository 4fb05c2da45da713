// lower-deterministic-float-reductions: a parallel float sum → fixed chunks summed in parallel
// (each a reassoc loop), then added pairwise in a fixed order: the same bits for any thread
// count. Integer reductions are exact in any order and stay OpenMP reductions.
// RUN: polyflow-opt --pass 'lower-deterministic-float-reductions{chunks=4}' %s | filecheck %s

// CHECK-LABEL: func.func @sum
// CHECK:      %[[PARTIALS:.*]] = memref.alloca() : memref<4xf32>
// CHECK:      %[[TRIPS:.*]] = arith.ceildivsi
// CHECK:      %[[CHUNK:.*]] = arith.ceildivsi %[[TRIPS]], %c4
// CHECK:      scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%c4) step (%{{.*}}) {
// CHECK:        %[[FIRST:.*]] = arith.muli %[[C]], %[[CHUNK]]
// CHECK:        arith.minsi
// CHECK:        %[[S:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK:          memref.load %arg1
// CHECK:          arith.addf %[[ACC]], %{{.*}} fastmath<reassoc> : f32
// CHECK:        memref.store %[[S]], %[[PARTIALS]][%[[C]]]
// CHECK-NOT:  scf.reduce(
// CHECK:      %[[P0:.*]] = memref.load %[[PARTIALS]]
// CHECK:      %[[P1:.*]] = memref.load %[[PARTIALS]]
// CHECK:      %[[P2:.*]] = memref.load %[[PARTIALS]]
// CHECK:      %[[P3:.*]] = memref.load %[[PARTIALS]]
// CHECK:      %[[A:.*]] = arith.addf %[[P0]], %[[P1]] : f32
// CHECK:      %[[B:.*]] = arith.addf %[[P2]], %[[P3]] : f32
// CHECK:      %[[AB:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK:      %[[R:.*]] = arith.addf %{{.*}}, %[[AB]] : f32
// CHECK:      return %[[R]]
func.func @sum(%n: index, %x: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = arith.constant 0.0 : f32
  %r = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%init) -> f32 {
    %v = memref.load %x[%i] : memref<?xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %r : f32
}

// CHECK-LABEL: func.func @isum
// CHECK:      scf.parallel {{.*}} init
// CHECK:        scf.reduce(
func.func @isum(%n: index, %x: memref<?xi32>) -> i32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = arith.constant 0 : i32
  %r = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%init) -> i32 {
    %v = memref.load %x[%i] : memref<?xi32>
    scf.reduce(%v : i32) {
    ^bb0(%a: i32, %b: i32):
      %s = arith.addi %a, %b : i32
      scf.reduce.return %s : i32
    }
  }
  return %r : i32
}
