// schedule-micro-kernels: contraction nests → register blocks of MR rows × NR vectors, kept in
// registers across the reduction loops, with narrower edge blocks; B-like reads come from a
// panel; convolutions read their input as vectors at w + kw.
// RUN: polyflow-opt --pass 'schedule-micro-kernels,canonicalize,cse' %s | filecheck %s
// RUN: polyflow-opt --pass 'schedule-micro-kernels{rows=2 vectors=1 vector_bits=128 contract=false},canonicalize,cse' %s | filecheck %s --check-prefix=SMALL

// gemm's update in (i, k, j) order: u = i, v = j, r = k. The panel of B is copied first, then
// blocks of 6 rows × 2 vectors of 4 doubles run the k loop with 12 accumulators.
// CHECK-LABEL: func.func @gemm
// CHECK-NOT:  affine.for
// CHECK:      %[[PANEL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<7x64x8xf64>
// CHECK:      vector.load %arg2[{{.*}}] : memref<64x64xf64>, vector<4xf64>
// CHECK-NEXT: vector.store {{.*}}, %[[PANEL]][{{.*}}] : memref<7x64x8xf64>, vector<4xf64>
// CHECK:      scf.for %{{.*}} = %c0 to %c48 step %c6
// CHECK:      scf.for %{{.*}} = %c0 to %c56 step %c8
// CHECK-COUNT-12: vector.load %arg0
// CHECK:      scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>)
// CHECK:      memref.load %arg1
// CHECK:      vector.load %[[PANEL]]
// CHECK:      vector.broadcast
// CHECK:      arith.mulf {{.*}} fastmath<contract> : vector<4xf64>
// CHECK:      arith.addf {{.*}} fastmath<contract> : vector<4xf64>
// CHECK-COUNT-12: vector.store {{.*}}, %arg0
// The edge columns (56 to 61: one vector of 4, then a scalar column) read B itself; the
// edge rows (48 and 49) run as blocks of 2 rows, reading the panel where their columns are.
// CHECK:      scf.for {{.*}} -> (vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>)
// CHECK:      vector.load %arg2[{{.*}}, %c56]
// CHECK:      scf.for {{.*}} -> (f64, f64, f64, f64, f64, f64)
// CHECK:      memref.load %arg2[{{.*}}, %c60]
// CHECK:      scf.for %{{.*}} = %c0 to %c56 step %c8
// CHECK:      scf.for {{.*}} -> (vector<4xf64>, vector<4xf64>, vector<4xf64>, vector<4xf64>)
// CHECK:      vector.load %[[PANEL]]
// CHECK:      scf.for {{.*}} -> (vector<4xf64>, vector<4xf64>)
// CHECK:      vector.load %arg2[{{.*}}, %c56]
// CHECK:      scf.for {{.*}} -> (f64, f64)
// CHECK:      memref.dealloc %[[PANEL]]
// CHECK:      return
// SMALL-LABEL: func.func @gemm
// SMALL:      memref<30x64x2xf64>
// SMALL:      step %c2
// SMALL:      scf.for {{.*}} -> (vector<2xf64>, vector<2xf64>)
// SMALL-NOT:  fastmath<contract>
// SMALL:      return
func.func @gemm(%C: memref<64x64xf64>, %A: memref<64x64xf64>, %B: memref<64x64xf64>, %alpha: f64) {
  affine.for %i = 0 to 50 {
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to 61 {
        %c = affine.load %C[%i, %j] : memref<64x64xf64>
        %a = affine.load %A[%i, %k] : memref<64x64xf64>
        %s = arith.mulf %alpha, %a : f64
        %b = affine.load %B[%k, %j] : memref<64x64xf64>
        %p = arith.mulf %s, %b : f64
        %t = arith.addf %c, %p : f64
        affine.store %t, %C[%i, %j] : memref<64x64xf64>
      }
    }
  }
  return
}

// A layer with transposed weights in (b, h, i) order, i a register reduction: init and ReLU
// guards around it test only the tile loop, so they apply to the whole block. The panel is
// filled element by element (W[h][i] is not contiguous along h).
// CHECK-LABEL: func.func @layer
// CHECK:      %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x32x16xf32>
// CHECK:      memref.load %arg1[{{.*}}] : memref<32x32xf32>
// CHECK-NEXT: memref.store {{.*}}, %[[P]]
// CHECK:      scf.for {{.*}} step %c6
// CHECK:      scf.if {{.*}} -> (vector<8xf32>
// CHECK:      vector.load %arg2
// CHECK:      scf.for {{.*}} iter_args
// CHECK:      vector.load %[[P]]
// CHECK:      scf.if {{.*}} -> (vector<8xf32>
// CHECK:      arith.maximumf {{.*}} : vector<8xf32>
// CHECK:      vector.store
// CHECK:      return
func.func @layer(%in: memref<32x32xf32>, %w: memref<32x32xf32>, %bias: memref<32xf32>, %out: memref<32x32xf32>, %kt: index) {
  %zero = arith.constant 0.0 : f32
  affine.for %b = 0 to 32 {
    affine.for %h = 0 to 32 {
      affine.if affine_set<(d0) : (d0 == 0)>(%kt) {
        %x = affine.load %bias[%h] : memref<32xf32>
        affine.store %x, %out[%b, %h] : memref<32x32xf32>
      }
      %init = affine.load %out[%b, %h] : memref<32x32xf32>
      %sum = affine.for %i = 0 to 32 iter_args(%acc = %init) -> (f32) {
        %a = affine.load %in[%b, %i] : memref<32x32xf32>
        %x = affine.load %w[%h, %i] : memref<32x32xf32>
        %p = arith.mulf %a, %x : f32
        %s = arith.addf %acc, %p : f32
        affine.yield %s : f32
      }
      affine.store %sum, %out[%b, %h] : memref<32x32xf32>
      affine.if affine_set<(d0) : (d0 - 1 == 0)>(%kt) {
        %y = affine.load %out[%b, %h] : memref<32x32xf32>
        %r = arith.maximumf %y, %zero : f32
        affine.store %r, %out[%b, %h] : memref<32x32xf32>
      }
    }
  }
  return
}

// The TC `+=!` initialization fused into the first k: the guard tests k, so the k loop is cut
// where it can hold; here (constant bounds) that is k = 0, whose test folds away, and the
// rest of the loop runs without it.
// CHECK-LABEL: func.func @init_at_first_k
// CHECK-NOT:  scf.if
// CHECK:      scf.for {{.*}} step %c6
// CHECK-NOT:  scf.if
// CHECK:      %[[R:.*]]:12 = scf.for %{{.*}} = %c1 to %c64 step %c1 iter_args
// CHECK-NOT:  scf.if
// CHECK:      vector.store %[[R]]#0
func.func @init_at_first_k(%A: memref<64x64xf32>, %B: memref<64x64xf32>, %C: memref<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  affine.for %i = 0 to 64 {
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to 64 {
        affine.if affine_set<(d0) : (d0 == 0)>(%k) {
          affine.store %zero, %C[%i, %j] : memref<64x64xf32>
        }
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

// A row vector (the stored element indexed by j alone) summed over two short loops: one row
// of 12 vectors (MR x NR) kept in registers across both, the 16 columns left in a tail block.
// CHECK-LABEL: func.func @row_vector_sum
// CHECK:      vector.load %{{.*}} : memref<64xf64>, vector<4xf64>
// CHECK:      scf.for
// CHECK-NEXT: scf.for
// CHECK-NEXT: memref.load
// CHECK-NEXT: vector.broadcast
// CHECK-NEXT: arith.addf
// CHECK:      vector.store %{{.*}} : memref<64xf64>, vector<4xf64>
func.func @row_vector_sum(%A: memref<64x64xf64>, %x: memref<64xf64>) {
  affine.for %i = 0 to 64 {
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to 64 {
        %c = affine.load %x[%j] : memref<64xf64>
        %a = affine.load %A[%i, %k] : memref<64x64xf64>
        %t = arith.addf %c, %a : f64
        affine.store %t, %x[%j] : memref<64xf64>
      }
    }
  }
  return
}

// Nests left alone: a row vector summed over a reduction longer than a tile (it would walk
// down D's columns); the stored array is read at another element; a bound uses another loop
// of the nest (a triangle); a read along j with stride 64 that varies with i too; a guard
// that tests j.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT:  vector
// CHECK-NOT:  scf.for
// CHECK:      return
func.func @untouched(%A: memref<64x64xf64>, %B: memref<64x64xf64>, %C: memref<64x64xf64>, %x: memref<64xf64>, %D: memref<300x64xf64>) {
  %c0 = arith.constant 0.0 : f64
  affine.for %k = 0 to 300 {
    affine.for %j = 0 to 64 {
      %c = affine.load %x[%j] : memref<64xf64>
      %a = affine.load %D[%k, %j] : memref<300x64xf64>
      %t = arith.addf %c, %a : f64
      affine.store %t, %x[%j] : memref<64xf64>
    }
  }
  affine.for %i = 1 to 64 {
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to 64 {
        %c = affine.load %C[%i - 1, %j] : memref<64x64xf64>
        %a = affine.load %A[%i, %k] : memref<64x64xf64>
        %t = arith.addf %c, %a : f64
        affine.store %t, %C[%i, %j] : memref<64x64xf64>
      }
    }
  }
  affine.for %i = 0 to 64 {
    affine.for %k = 0 to affine_map<(d0) -> (d0)>(%i) {
      affine.for %j = 0 to 64 {
        %c = affine.load %C[%i, %j] : memref<64x64xf64>
        %a = affine.load %A[%i, %k] : memref<64x64xf64>
        %t = arith.addf %c, %a : f64
        affine.store %t, %C[%i, %j] : memref<64x64xf64>
      }
    }
  }
  affine.for %i = 0 to 64 {
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to 64 {
        %c = affine.load %C[%i, %j] : memref<64x64xf64>
        %a = affine.load %A[%j, %i] : memref<64x64xf64>
        %t = arith.addf %c, %a : f64
        affine.store %t, %C[%i, %j] : memref<64x64xf64>
      }
    }
  }
  affine.for %i = 0 to 64 {
    affine.for %k = 0 to 64 {
      affine.for %j = 0 to 64 {
        affine.if affine_set<(d0) : (d0 - 3 == 0)>(%j) {
          affine.store %c0, %C[%i, %j] : memref<64x64xf64>
        }
        %c = affine.load %C[%i, %j] : memref<64x64xf64>
        %a = affine.load %B[%i, %k] : memref<64x64xf64>
        %t = arith.addf %c, %a : f64
        affine.store %t, %C[%i, %j] : memref<64x64xf64>
      }
    }
  }
  return
}

// A reduction loop whose bound is computed inside the nest cannot have its bounds computed
// before it: left alone.
// CHECK-LABEL: func.func @bound_inside
// CHECK-NOT:  vector
// CHECK:      return
func.func @bound_inside(%A: memref<64x64xf32>, %B: memref<64x64xf32>, %C: memref<64x64xf32>) {
  affine.for %i = 0 to 64 {
    affine.for %j = 0 to 64 {
      %n = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%j)
      %init = affine.load %C[%i, %j] : memref<64x64xf32>
      %sum = affine.for %k = 0 to affine_map<(d0) -> (d0)>(%n) iter_args(%acc = %init) -> (f32) {
        %a = affine.load %A[%i, %k] : memref<64x64xf32>
        %b = affine.load %B[%k, %j] : memref<64x64xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %acc, %p : f32
        affine.yield %s : f32
      }
      affine.store %sum, %C[%i, %j] : memref<64x64xf32>
    }
  }
  return
}

// A convolution as TC conv2d is scheduled: out[n][k][h][w] summed over c in memory (with the
// `+=!` initialization at c = 0) and over kh and kw in a register. u = k, v = w; h runs outside
// the blocks and in parallel instead of k (which has only two full blocks of 6); the c loop is
// cut after its first iteration, where the accumulators start at zero; each vector of `in` is
// read at w + kw (unaligned), each weight broadcast once for the two vectors of its row; each
// element's sum runs c, then kh, then kw, as in the source.
// CHECK-LABEL: func.func @conv
// CHECK:      affine.for %[[N:arg[0-9]+]] = 0 to 2 {
// CHECK-NEXT: scf.parallel (%[[H:arg[0-9]+]]) = (%c0) to (%c10)
// CHECK-NEXT: scf.for %[[K:arg[0-9]+]] = %c0 to %c12 step %c6
// CHECK:      scf.for %[[KH:arg[0-9]+]] = %c0 to %c3 step %c1 iter_args(%{{.*}} = %[[ZERO:cst[_0-9]*]], {{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NEXT: scf.for %[[KW:arg[0-9]+]] = %c0 to %c3 step %c1
// CHECK-NEXT: %[[ROW:.*]] = affine.apply #{{.*}}(%[[H]], %[[KH]])
// CHECK-NEXT: vector.load %arg0[%[[N]], %c0, %[[ROW]], %[[KW]]] : memref<2x4x12x22xf32>, vector<8xf32>
// CHECK:      memref.load %arg1[%[[K]], %c0, %[[KH]], %[[KW]]] : memref<16x4x3x3xf32>
// CHECK:      vector.broadcast
// CHECK:      arith.mulf {{.*}} fastmath<contract> : vector<8xf32>
// CHECK:      %[[SUM:.*]]:12 = scf.for %{{.*}} = %c1 to %c4 step %c1 iter_args
// CHECK:      vector.store %[[SUM]]#0, %arg2[%[[N]], %[[K]], %[[H]], %c0]
// The edge columns 16 to 19 run as vectors of 4, the edge rows 12 to 15 as a block of 4 rows:
// CHECK:      -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK:      -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK:      -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK:      scf.reduce
// CHECK:      return
// SMALL-LABEL: func.func @conv
// SMALL:      scf.for {{.*}} -> (vector<4xf32>, vector<4xf32>)
// SMALL:      return
func.func @conv(%in: memref<2x4x12x22xf32>, %wt: memref<16x4x3x3xf32>, %out: memref<2x16x10x20xf32>) {
  %zero = arith.constant 0.0 : f32
  affine.for %n = 0 to 2 {
    affine.parallel (%k) = (0) to (16) {
      affine.for %h = 0 to 10 {
        affine.for %c = 0 to 4 {
          affine.for %w = 0 to 20 {
            affine.if affine_set<(d0) : (d0 == 0)>(%c) {
              affine.store %zero, %out[%n, %k, %h, %w] : memref<2x16x10x20xf32>
            }
            %init = affine.load %out[%n, %k, %h, %w] : memref<2x16x10x20xf32>
            %sum = affine.for %i = 0 to 3 iter_args(%acc = %init) -> (f32) {
              %row = affine.for %j = 0 to 3 iter_args(%acc2 = %acc) -> (f32) {
                %x = affine.load %in[%n, %c, %h + %i, %w + %j] : memref<2x4x12x22xf32>
                %y = affine.load %wt[%k, %c, %i, %j] : memref<16x4x3x3xf32>
                %p = arith.mulf %x, %y : f32
                %s = arith.addf %acc2, %p : f32
                affine.yield %s : f32
              }
              affine.yield %row : f32
            }
            affine.store %sum, %out[%n, %k, %h, %w] : memref<2x16x10x20xf32>
          }
        }
      }
    }
  }
  return
}

// A convolution with stride 2 reads `in` at 2 * w + kw: not contiguous along w, left alone.
// CHECK-LABEL: func.func @strided_conv
// CHECK-NOT:  vector
// CHECK:      return
func.func @strided_conv(%in: memref<4x21x41xf32>, %wt: memref<8x4x3x3xf32>, %out: memref<8x10x20xf32>) {
  affine.for %k = 0 to 8 {
    affine.for %h = 0 to 10 {
      affine.for %c = 0 to 4 {
        affine.for %w = 0 to 20 {
          %init = affine.load %out[%k, %h, %w] : memref<8x10x20xf32>
          %sum = affine.for %i = 0 to 3 iter_args(%acc = %init) -> (f32) {
            %row = affine.for %j = 0 to 3 iter_args(%acc2 = %acc) -> (f32) {
              %x = affine.load %in[%c, %h * 2 + %i, %w * 2 + %j] : memref<4x21x41xf32>
              %y = affine.load %wt[%k, %c, %i, %j] : memref<8x4x3x3xf32>
              %p = arith.mulf %x, %y : f32
              %s = arith.addf %acc2, %p : f32
              affine.yield %s : f32
            }
            affine.yield %row : f32
          }
          affine.store %sum, %out[%k, %h, %w] : memref<8x10x20xf32>
        }
      }
    }
  }
  return
}
