// schedule-micro-kernels with transposed blocks: the vectors run along the output channels k
// (a subscript other than the output's last), the rows along its columns x. The weights, the
// one read that varies with k, are gathered 16 channels at a time (72 elements apart) into a
// panel [channel block][c, i, j][32] once, the last block padded with zeros (lanes past 40
// hold 0: a masked gather, a store of zeros); each block gathers its accumulators from the
// output (lanes 168 elements apart: 6 x 28), runs c, i and j in registers (the input
// broadcast per row), and scatters them back. 40 channels: a block of 2 x 16 and one of 16
// masked to 8.
// RUN: polyflow-opt --pass 'schedule-micro-kernels{vector_bits=512 masked_tails=true rows=7 transposed=true},canonicalize,cse' %s | filecheck %s

// CHECK-LABEL: func.func @conv
// CHECK-DAG:  %[[ALL:.*]] = arith.constant dense<true> : vector<16xi1>
// CHECK-DAG:  %[[APART:.*]] = arith.constant dense<[0, 168, 336, {{.*}}, 2520]> : vector<16xi32>
// CHECK-DAG:  %[[WEIGHTS:.*]] = arith.constant dense<[0, 72, 144, {{.*}}, 1080]> : vector<16xi32>
// CHECK:      %[[PANEL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x72x32xf32>
// CHECK:      %[[W0:.*]] = vector.gather %arg2[%c0, %{{.*}}, %{{.*}}, %{{.*}}] [%[[WEIGHTS]]], %[[ALL]]
// CHECK-NEXT: vector.store %[[W0]], %[[PANEL]][%c0, %{{.*}}, %c0]
// CHECK:      %[[W16:.*]] = vector.gather %arg2[%c16, %{{.*}}, %{{.*}}, %{{.*}}] [%[[WEIGHTS]]], %[[ALL]]
// CHECK-NEXT: vector.store %[[W16]], %[[PANEL]][%c0, %{{.*}}, %c16]
// CHECK:      %[[FIRST8:.*]] = vector.constant_mask [8] : vector<16xi1>
// CHECK-NEXT: %[[W32:.*]] = vector.gather %arg2[%c32, %{{.*}}, %{{.*}}, %{{.*}}] [%[[WEIGHTS]]], %[[FIRST8]]
// CHECK-NEXT: vector.store %[[W32]], %[[PANEL]][%c1, %{{.*}}, %c0]
// CHECK-NEXT: vector.store %{{.*}}, %[[PANEL]][%c1, %{{.*}}, %c16]
// CHECK:      scf.parallel (%[[H:.*]]) = (%c0) to (%c6)
// CHECK:      scf.for %[[X:.*]] = %c0 to %c28 step %c7
// CHECK:      vector.gather %arg0[%c0, %c0, %[[H]], %[[X]]] [%[[APART]]], %[[ALL]]
// CHECK:      vector.gather %arg0[%c0, %c16, %[[H]], %[[X]]] [%[[APART]]], %[[ALL]]
// CHECK:      scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:      memref.load %arg1[%c0, %{{.*}}, %{{.*}}, %{{.*}}] : memref<1x8x8x30xf32>
// CHECK:      vector.load %[[PANEL]][%c0, %{{.*}}, %c0] : memref<2x72x32xf32>, vector<16xf32>
// CHECK-NEXT: vector.load %[[PANEL]][%c0, %{{.*}}, %c16] : memref<2x72x32xf32>, vector<16xf32>
// CHECK:      vector.scatter %arg0[%c0, %c0, %[[H]], %[[X]]] [%[[APART]]], %[[ALL]]
// CHECK:      %[[EIGHT:.*]] = vector.constant_mask [8] : vector<16xi1>
// CHECK:      vector.gather %arg0[%c0, %c32, %[[H]], %[[X]]] [%[[APART]]], %[[EIGHT]]
// CHECK:      vector.load %[[PANEL]][%c1, %{{.*}}, %c0] : memref<2x72x32xf32>, vector<16xf32>
// CHECK:      vector.scatter %arg0[%c0, %c32, %[[H]], %[[X]]] [%[[APART]]], %[[EIGHT]]
// CHECK:      memref.dealloc %[[PANEL]]
// CHECK:      return
func.func @conv(%out: memref<1x40x6x28xf32>, %in: memref<1x8x8x30xf32>, %w: memref<40x8x3x3xf32>) {
  affine.parallel (%k) = (0) to (40) {
    affine.for %h = 0 to 6 {
      affine.for %c = 0 to 8 {
        affine.for %x = 0 to 28 {
          affine.for %i = 0 to 3 {
            affine.for %j = 0 to 3 {
              %o = affine.load %out[0, %k, %h, %x] : memref<1x40x6x28xf32>
              %a = affine.load %in[0, %c, %h + %i, %x + %j] : memref<1x8x8x30xf32>
              %b = affine.load %w[%k, %c, %i, %j] : memref<40x8x3x3xf32>
              %p = arith.mulf %a, %b : f32
              %t = arith.addf %o, %p : f32
              affine.store %t, %out[0, %k, %h, %x] : memref<1x40x6x28xf32>
            }
          }
        }
      }
    }
  }
  return
}

// By default ("auto") the same nest keeps its vectors along the columns: 40 channels fill 40
// of 48 lanes, 28 columns 28 of 32.
// RUN: polyflow-opt --pass 'schedule-micro-kernels{vector_bits=512 masked_tails=true},canonicalize,cse' %s | filecheck %s --check-prefix=AUTO
// AUTO-LABEL: func.func @conv
// AUTO-NOT:   vector.gather
// AUTO:       vector.maskedload %arg0
// AUTO:       return

// Two register sums side by side: a panel row would be no single iteration of both, so even
// when asked the block stays untransposed (the vectors along x, no gathers).
// RUN: polyflow-opt --pass 'schedule-micro-kernels{vector_bits=512 masked_tails=true transposed=true},canonicalize,cse' %s | filecheck %s --check-prefix=SIDE
// SIDE-LABEL: func.func @two_sums
// SIDE-NOT:   vector.gather
// SIDE:       vector.load %arg0
// SIDE-NOT:   vector.scatter
// SIDE:       return
func.func @two_sums(%out: memref<40x32xf32>, %a: memref<40x8xf32>, %b: memref<40x8xf32>, %x: memref<8x32xf32>, %y: memref<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  affine.for %k = 0 to 40 {
    affine.for %w = 0 to 32 {
      %s = affine.for %c = 0 to 8 iter_args(%acc = %zero) -> (f32) {
        %p = affine.load %a[%k, %c] : memref<40x8xf32>
        %q = affine.load %x[%c, %w] : memref<8x32xf32>
        %m = arith.mulf %p, %q : f32
        %n = arith.addf %acc, %m : f32
        affine.yield %n : f32
      }
      %t = affine.for %c = 0 to 8 iter_args(%acc = %zero) -> (f32) {
        %p = affine.load %b[%k, %c] : memref<40x8xf32>
        %q = affine.load %y[%c, %w] : memref<8x32xf32>
        %m = arith.mulf %p, %q : f32
        %n = arith.addf %acc, %m : f32
        affine.yield %n : f32
      }
      %d = arith.subf %s, %t : f32
      %o = affine.load %out[%k, %w] : memref<40x32xf32>
      %r = arith.addf %o, %d : f32
      affine.store %r, %out[%k, %w] : memref<40x32xf32>
    }
  }
  return
}
