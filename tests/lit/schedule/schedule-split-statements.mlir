// schedule-split-statements: a reduction along the innermost loop whose right-hand side reads
// several access patterns → the right-hand side into a scratchpad, the reduction reading it.
// RUN: polyflow-opt --pass 'schedule-split-statements' %s | filecheck %s
// RUN: polyflow-opt --pass 'schedule-split-statements{max_scratchpad_bytes=1024}' %s | filecheck %s --check-prefix=SMALL
// RUN: polyflow-opt --pass 'schedule-split-statements' --debug-info %s | filecheck %s --check-prefix=LOC

// The size maps of @symbolic (below).
// CHECK-DAG:   #[[NI:.*]] = affine_map<()[s0] -> (s0 - 1, 16)>
// CHECK-DAG:   #[[CLAMP:.*]] = affine_map<(d0) -> (d0, 0)>
// CHECK-DAG:   #[[NK:.*]] = affine_map<()[s0] -> (s0 - 1, 21)>
// CHECK-DAG:   #[[NJ:.*]] = affine_map<()[s0] -> (s0, 18)>

// gemm in i, j, k order: C[i][j] += alpha * A[i][k] * B[k][j]. The product depends on i, j, k:
// an 8x8x8 scratchpad (2 KiB, on the stack), written right before the reduction reads it.
// CHECK-LABEL: func.func @gemm
// CHECK-NEXT:    %[[M:.*]] = memref.alloca() : memref<8x8x8xf32>
// CHECK-NEXT:    affine.for %[[I:.*]] = 0 to 8 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to 8 {
// CHECK-NEXT:          %[[C:.*]] = affine.load %arg2[%[[I]], %[[J]]] : memref<8x8xf32>
// CHECK-NEXT:          %[[A:.*]] = affine.load %arg0[%[[I]], %[[K]]] : memref<8x8xf32>
// CHECK-NEXT:          %[[AA:.*]] = arith.mulf %arg3, %[[A]] : f32
// CHECK-NEXT:          %[[B:.*]] = affine.load %arg1[%[[K]], %[[J]]] : memref<8x8xf32>
// CHECK-NEXT:          %[[P:.*]] = arith.mulf %[[AA]], %[[B]] : f32
// CHECK-NEXT:          affine.store %[[P]], %[[M]][%[[I]], %[[J]], %[[K]]] : memref<8x8x8xf32>
// CHECK-NEXT:          %[[R:.*]] = affine.load %[[M]][%[[I]], %[[J]], %[[K]]] : memref<8x8x8xf32>
// CHECK-NEXT:          %[[S:.*]] = arith.addf %[[C]], %[[R]] : f32
// CHECK-NEXT:          affine.store %[[S]], %arg2[%[[I]], %[[J]]] : memref<8x8xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    return
// The 2 KiB scratchpad is over a 1 KiB limit: not split.
// SMALL-LABEL: func.func @gemm
// SMALL-NOT:     memref.alloc
// SMALL:         return
// Both statements keep the store's location; the new one is named after it.
// LOC-LABEL: func.func @gemm
// LOC:         affine.store %{{.*}}, %alloca[{{.*}}] : memref<8x8x8xf32> loc([[RHS:#loc[0-9]+]])
// LOC-NEXT:    affine.load %alloca[{{.*}}] : memref<8x8x8xf32> loc([[STORE:#loc[0-9]+]])
// LOC:         affine.store %{{.*}}, %arg2[{{.*}}] : memref<8x8xf32> loc([[STORE]])
func.func @gemm(%A: memref<8x8xf32>, %B: memref<8x8xf32>, %C: memref<8x8xf32>, %alpha: f32) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %c = affine.load %C[%i, %j] : memref<8x8xf32> loc("S1"("gemm.c":5:9))
        %a = affine.load %A[%i, %k] : memref<8x8xf32> loc("S1"("gemm.c":5:20))
        %aa = arith.mulf %alpha, %a : f32 loc("S1"("gemm.c":5:20))
        %b = affine.load %B[%k, %j] : memref<8x8xf32> loc("S1"("gemm.c":5:30))
        %p = arith.mulf %aa, %b : f32 loc("S1"("gemm.c":5:20))
        %s = arith.addf %c, %p : f32 loc("S1"("gemm.c":5:9))
        affine.store %s, %C[%i, %j] : memref<8x8xf32> loc("S1"("gemm.c":5:9))
      }
    }
  }
  return
}
// LOC-DAG: [[FILE:#loc[0-9]+]] = loc("gemm.c":5:9)
// LOC-DAG: [[STORE]] = loc("S1"([[FILE]]))
// LOC-DAG: [[RHS]] = loc("S1_rhs"([[FILE]]))

// 2mm: tmp = A * B, then D += tmp * C; both contractions are split, each with its own
// scratchpad (i, j, k for the first, i, l, j for the second).
// CHECK-LABEL: func.func @two_mm
// CHECK-DAG:     %[[M1:.*]] = memref.alloca() : memref<4x5x6xf64>
// CHECK-DAG:     %[[M2:.*]] = memref.alloca() : memref<4x7x5xf64>
// CHECK:         affine.for %[[I:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to 5 {
// CHECK-NEXT:        affine.store %{{.*}}, %arg2[%[[I]], %[[J]]]
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to 6 {
// CHECK:               affine.store %{{.*}}, %[[M1]][%[[I]], %[[J]], %[[K]]] : memref<4x5x6xf64>
// CHECK-NEXT:          affine.load %[[M1]][%[[I]], %[[J]], %[[K]]] : memref<4x5x6xf64>
// CHECK-NEXT:          arith.addf
// CHECK-NEXT:          affine.store %{{.*}}, %arg2[%[[I]], %[[J]]] : memref<4x5xf64>
// CHECK:         affine.for %[[I2:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[L:.*]] = 0 to 7 {
// CHECK-NEXT:        affine.for %[[J2:.*]] = 0 to 5 {
// CHECK:               affine.store %{{.*}}, %[[M2]][%[[I2]], %[[L]], %[[J2]]] : memref<4x7x5xf64>
// CHECK-NEXT:          affine.load %[[M2]][%[[I2]], %[[L]], %[[J2]]] : memref<4x7x5xf64>
// CHECK-NEXT:          arith.addf
// CHECK-NEXT:          affine.store %{{.*}}, %arg4[%[[I2]], %[[L]]] : memref<4x7xf64>
func.func @two_mm(%A: memref<4x6xf64>, %B: memref<6x5xf64>, %tmp: memref<4x5xf64>,
                  %C: memref<5x7xf64>, %D: memref<4x7xf64>) {
  %zero = arith.constant 0.0 : f64
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 5 {
      affine.store %zero, %tmp[%i, %j] : memref<4x5xf64>
      affine.for %k = 0 to 6 {
        %t = affine.load %tmp[%i, %j] : memref<4x5xf64>
        %a = affine.load %A[%i, %k] : memref<4x6xf64>
        %b = affine.load %B[%k, %j] : memref<6x5xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %t, %p : f64
        affine.store %s, %tmp[%i, %j] : memref<4x5xf64>
      }
    }
  }
  affine.for %i = 0 to 4 {
    affine.for %l = 0 to 7 {
      affine.for %j = 0 to 5 {
        %d = affine.load %D[%i, %l] : memref<4x7xf64>
        %t = affine.load %tmp[%i, %j] : memref<4x5xf64>
        %c = affine.load %C[%j, %l] : memref<5x7xf64>
        %p = arith.mulf %t, %c : f64
        %s = arith.addf %d, %p : f64
        affine.store %s, %D[%i, %l] : memref<4x7xf64>
      }
    }
  }
  return
}

// syrk as PolyBench writes it (i, k, j <= i): the store C[i][j] uses the innermost IV j, so it
// is no reduction along the innermost loop: left alone.
// CHECK-LABEL: func.func @syrk
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @syrk(%A: memref<8x6xf64>, %C: memref<8x8xf64>, %alpha: f64) {
  affine.for %i = 0 to 8 {
    affine.for %k = 0 to 6 {
      affine.for %j = 0 to affine_map<(d0) -> (d0 + 1)>(%i) {
        %c = affine.load %C[%i, %j] : memref<8x8xf64>
        %a = affine.load %A[%i, %k] : memref<8x6xf64>
        %aa = arith.mulf %alpha, %a : f64
        %b = affine.load %A[%j, %k] : memref<8x6xf64>
        %p = arith.mulf %aa, %b : f64
        %s = arith.addf %c, %p : f64
        affine.store %s, %C[%i, %j] : memref<8x8xf64>
      }
    }
  }
  return
}

// syrk in i, j <= i, k order: split. A[i][k] and A[j][k] are one memref, two access patterns.
// The triangular j loop takes 0..7 over the whole domain: an 8x8x6 scratchpad.
// CHECK-LABEL: func.func @syrk_ijk
// CHECK-NEXT:    %[[M:.*]] = memref.alloca() : memref<8x8x6xf64>
// CHECK:         affine.for %[[I:.*]] = 0 to 8 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to #{{.*}}(%[[I]]) {
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to 6 {
// CHECK:               affine.store %{{.*}}, %[[M]][%[[I]], %[[J]], %[[K]]]
// CHECK-NEXT:          affine.load %[[M]][%[[I]], %[[J]], %[[K]]]
func.func @syrk_ijk(%A: memref<8x6xf64>, %C: memref<8x8xf64>, %alpha: f64) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to affine_map<(d0) -> (d0 + 1)>(%i) {
      affine.for %k = 0 to 6 {
        %c = affine.load %C[%i, %j] : memref<8x8xf64>
        %a = affine.load %A[%i, %k] : memref<8x6xf64>
        %aa = arith.mulf %alpha, %a : f64
        %b = affine.load %A[%j, %k] : memref<8x6xf64>
        %p = arith.mulf %aa, %b : f64
        %s = arith.addf %c, %p : f64
        affine.store %s, %C[%i, %j] : memref<8x8xf64>
      }
    }
  }
  return
}

// Elementwise in three loops: the store uses the innermost IV. Left alone.
// CHECK-LABEL: func.func @elementwise
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @elementwise(%A: memref<4x4x4xf32>, %B: memref<4x4x4xf32>, %D: memref<4x4x4xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      affine.for %k = 0 to 4 {
        %a = affine.load %A[%i, %j, %k] : memref<4x4x4xf32>
        %b = affine.load %B[%i, %j, %k] : memref<4x4x4xf32>
        %s = arith.addf %a, %b : f32
        affine.store %s, %D[%i, %j, %k] : memref<4x4x4xf32>
      }
    }
  }
  return
}

// A reduction whose right-hand side reads one access pattern (A[i][k] squared): nothing for
// the scheduler to gain. Left alone.
// CHECK-LABEL: func.func @one_pattern
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @one_pattern(%A: memref<4x4xf32>, %C: memref<4x4xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      affine.for %k = 0 to 4 {
        %c = affine.load %C[%i, %j] : memref<4x4xf32>
        %a = affine.load %A[%i, %k] : memref<4x4xf32>
        %p = arith.mulf %a, %a : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<4x4xf32>
      }
    }
  }
  return
}

// A reduction in two loops (matrix-vector): fewer than 3 loops. Left alone.
// CHECK-LABEL: func.func @matvec
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @matvec(%A: memref<8x8xf32>, %x: memref<8xf32>, %y: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      %acc = affine.load %y[%i] : memref<8xf32>
      %a = affine.load %A[%i, %j] : memref<8x8xf32>
      %b = affine.load %x[%j] : memref<8xf32>
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %p : f32
      affine.store %s, %y[%i] : memref<8xf32>
    }
  }
  return
}

// gemm in i, k, j order (PolyBench's): C[i][j] uses the innermost IV j. Left alone.
// CHECK-LABEL: func.func @gemm_ikj
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @gemm_ikj(%A: memref<8x8xf32>, %B: memref<8x8xf32>, %C: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %k = 0 to 8 {
      affine.for %j = 0 to 8 {
        %c = affine.load %C[%i, %j] : memref<8x8xf32>
        %a = affine.load %A[%i, %k] : memref<8x8xf32>
        %b = affine.load %B[%k, %j] : memref<8x8xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<8x8xf32>
      }
    }
  }
  return
}

// Symbolic bounds over arrays of static shape: the scratchpad's sizes are computed from the
// symbols at the top level (clamped to [0, the arrays' extents]), allocated on the heap once
// they are defined, and freed before the return. k runs over i + 1 .. n - 1, so i over
// 0 .. n - 2 and k over 1 .. n - 1: n - 1 values each, k indexed by k - 1 (the maps, printed
// at the top of the module, are checked there).
// CHECK-LABEL: func.func @symbolic
// CHECK-NEXT:    %[[N:.*]] = arith.index_cast %arg3 : i32 to index
// CHECK-NEXT:    %[[M:.*]] = arith.index_cast %arg4 : i32 to index
// CHECK-NEXT:    %[[SI:.*]] = affine.min #[[NI]]()[%[[N]]]
// CHECK-NEXT:    %[[I:.*]] = affine.max #[[CLAMP]](%[[SI]])
// CHECK-NEXT:    %[[SJ:.*]] = affine.min #[[NJ]]()[%[[M]]]
// CHECK-NEXT:    %[[J:.*]] = affine.max #[[CLAMP]](%[[SJ]])
// CHECK-NEXT:    %[[SK:.*]] = affine.min #[[NK]]()[%[[N]]]
// CHECK-NEXT:    %[[K:.*]] = affine.max #[[CLAMP]](%[[SK]])
// CHECK-NEXT:    %[[S:.*]] = memref.alloc(%[[I]], %[[J]], %[[K]]) : memref<?x?x?xf64>
// CHECK-NEXT:    affine.for
// CHECK-NEXT:      affine.for
// CHECK-NEXT:        affine.for
// CHECK:               affine.store %{{.*}}, %[[S]][%{{.*}}, %{{.*}}, %{{.*}} - 1] : memref<?x?x?xf64>
// CHECK:         memref.dealloc %[[S]] : memref<?x?x?xf64>
// CHECK-NEXT:    return
func.func @symbolic(%A: memref<16x22xf64>, %B: memref<22x18xf64>, %C: memref<16x18xf64>,
                    %ni: i32, %nj: i32) {
  %n = arith.index_cast %ni : i32 to index
  %m = arith.index_cast %nj : i32 to index
  affine.for %i = 0 to %n {
    affine.for %j = 0 to %m {
      affine.for %k = affine_map<(d0) -> (d0 + 1)>(%i) to %n {
        %c = affine.load %C[%i, %j] : memref<16x18xf64>
        %a = affine.load %A[%i, %k] : memref<16x22xf64>
        %b = affine.load %B[%k, %j] : memref<22x18xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %c, %p : f64
        affine.store %s, %C[%i, %j] : memref<16x18xf64>
      }
    }
  }
  return
}

// Symbolic bounds over arrays of unknown extent: the scratchpad's size has no bound known at
// compile time, so it could exceed the limit. Left alone.
// CHECK-LABEL: func.func @unbounded
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @unbounded(%A: memref<?x?xf64>, %B: memref<?x?xf64>, %C: memref<?x?xf64>, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to %n {
      affine.for %k = 0 to %n {
        %c = affine.load %C[%i, %j] : memref<?x?xf64>
        %a = affine.load %A[%i, %k] : memref<?x?xf64>
        %b = affine.load %B[%k, %j] : memref<?x?xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %c, %p : f64
        affine.store %s, %C[%i, %j] : memref<?x?xf64>
      }
    }
  }
  return
}

// 1024^3 f32 products would take 4 GiB, more than the 64 MiB default limit. Left alone.
// CHECK-LABEL: func.func @too_large
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @too_large(%A: memref<1024x1024xf32>, %B: memref<1024x1024xf32>,
                     %C: memref<1024x1024xf32>) {
  affine.for %i = 0 to 1024 {
    affine.for %j = 0 to 1024 {
      affine.for %k = 0 to 1024 {
        %c = affine.load %C[%i, %j] : memref<1024x1024xf32>
        %a = affine.load %A[%i, %k] : memref<1024x1024xf32>
        %b = affine.load %B[%k, %j] : memref<1024x1024xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<1024x1024xf32>
      }
    }
  }
  return
}

// A call in the right-hand side may have side effects. Left alone.
// CHECK-LABEL: func.func @with_call
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func private @f(f32, f32) -> f32
func.func @with_call(%A: memref<8x8xf32>, %B: memref<8x8xf32>, %C: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %c = affine.load %C[%i, %j] : memref<8x8xf32>
        %a = affine.load %A[%i, %k] : memref<8x8xf32>
        %b = affine.load %B[%k, %j] : memref<8x8xf32>
        %p = func.call @f(%a, %b) : (f32, f32) -> f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<8x8xf32>
      }
    }
  }
  return
}

// No accumulator (C[i][j] is overwritten along k): the whole stored value is the right-hand
// side; the store then writes what it reads back from the scratchpad.
// CHECK-LABEL: func.func @overwrite
// CHECK-NEXT:    %[[M:.*]] = memref.alloca() : memref<4x4x4xi32>
// CHECK:             %[[P:.*]] = arith.addi
// CHECK-NEXT:        affine.store %[[P]], %[[M]][
// CHECK-NEXT:        %[[R:.*]] = affine.load %[[M]][
// CHECK-NEXT:        affine.store %[[R]], %arg2[
func.func @overwrite(%A: memref<4x4xi32>, %B: memref<4x4xi32>, %C: memref<4x4xi32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      affine.for %k = 0 to 4 {
        %a = affine.load %A[%i, %k] : memref<4x4xi32>
        %b = affine.load %B[%k, %j] : memref<4x4xi32>
        %p = arith.addi %a, %b : i32
        affine.store %p, %C[%i, %j] : memref<4x4xi32>
      }
    }
  }
  return
}

// Two right-hand sides around the accumulator ((c + a*b) + a'*b'): not one statement to split
// out without reassociating. Left alone.
// CHECK-LABEL: func.func @two_sides
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @two_sides(%A: memref<8x8xf32>, %B: memref<8x8xf32>, %C: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %c = affine.load %C[%i, %j] : memref<8x8xf32>
        %a = affine.load %A[%i, %k] : memref<8x8xf32>
        %b = affine.load %B[%k, %j] : memref<8x8xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        %a2 = affine.load %A[%k, %i] : memref<8x8xf32>
        %b2 = affine.load %B[%j, %k] : memref<8x8xf32>
        %p2 = arith.mulf %a2, %b2 : f32
        %s2 = arith.addf %s, %p2 : f32
        affine.store %s2, %C[%i, %j] : memref<8x8xf32>
      }
    }
  }
  return
}
