// schedule-micro-kernels with masked tails (AVX and AVX-512 targets): the columns left after
// the full blocks of NR vectors run in one block of whole vectors and one vector of the
// fewest lanes that hold the rest, masked to the lanes that exist.
// RUN: polyflow-opt --pass 'schedule-micro-kernels{vector_bits=512 masked_tails=true},canonicalize,cse' %s | filecheck %s

// 61 columns of f32 in vectors of 16: a full block of 2 vectors (0 to 32), then the 29 left as
// 16 lanes at 32 and 16 lanes at 48 masked to 13; C, B and the stores all use the mask.
// CHECK-LABEL: func.func @gemm
// CHECK:      scf.for %{{.*}} = %c0 to %c12 step %c6
// CHECK:      %[[MASK:.*]] = vector.constant_mask [13] : vector<16xi1>
// CHECK-NEXT: vector.load %arg0[%{{.*}}, %c32] : memref<64x64xf32>, vector<16xf32>
// CHECK-NEXT: vector.maskedload %arg0[%{{.*}}, %c48], %[[MASK]]
// CHECK:      scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:      vector.load %arg2[%{{.*}}, %c32]
// CHECK-NEXT: vector.maskedload %arg2[%{{.*}}, %c48], %[[MASK]]
// CHECK:      vector.maskedstore %arg0[%{{.*}}, %c48], %[[MASK]]
// CHECK-NOT:  scf.if
// CHECK:      return

// A width known only at run time: one block per case (0 or 1 whole vectors, then 4, 8 or 16
// lanes masked to the rest), at most one of which runs.
// CHECK-LABEL: func.func @dynamic
// CHECK:      scf.for %{{.*}} = %c0 to %{{.*}} step %c32
// CHECK:      scf.if
// CHECK:      vector.create_mask %{{.*}} : vector<4xi1>
// CHECK:      scf.if
// CHECK:      vector.create_mask %{{.*}} : vector<8xi1>
// CHECK:      scf.if
// CHECK:      vector.create_mask %{{.*}} : vector<16xi1>
// CHECK:      scf.if
// CHECK:      %[[M4:.*]] = vector.create_mask %{{.*}} : vector<4xi1>
// CHECK:      vector.load %arg0{{.*}} vector<16xf32>
// CHECK-NEXT: vector.maskedload %arg0{{.*}}, %[[M4]]{{.*}} into vector<4xf32>
// CHECK:      scf.for {{.*}} -> (vector<16xf32>, vector<4xf32>, vector<16xf32>, vector<4xf32>,
// CHECK:      scf.if
// CHECK:      vector.create_mask %{{.*}} : vector<8xi1>
// CHECK:      scf.if
// CHECK:      vector.create_mask %{{.*}} : vector<16xi1>
// CHECK-NOT:  scf.if
// CHECK:      return
func.func @gemm(%C: memref<64x64xf32>, %A: memref<64x64xf32>, %B: memref<64x64xf32>) {
  affine.for %i = 0 to 12 {
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to 61 {
        %c = affine.load %C[%i, %j] : memref<64x64xf32>
        %a = affine.load %A[%i, %k] : memref<64x64xf32>
        %b = affine.load %B[%k, %j] : memref<64x64xf32>
        %p = arith.mulf %a, %b : f32
        %t = arith.addf %c, %p : f32
        affine.store %t, %C[%i, %j] : memref<64x64xf32>
      }
    }
  }
  return
}

func.func @dynamic(%C: memref<?x?xf32>, %A: memref<?x?xf32>, %B: memref<?x?xf32>, %n: index) {
  affine.for %i = 0 to 12 {
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to %n {
        %c = affine.load %C[%i, %j] : memref<?x?xf32>
        %a = affine.load %A[%i, %k] : memref<?x?xf32>
        %b = affine.load %B[%k, %j] : memref<?x?xf32>
        %p = arith.mulf %a, %b : f32
        %t = arith.addf %c, %p : f32
        affine.store %t, %C[%i, %j] : memref<?x?xf32>
      }
    }
  }
  return
}
