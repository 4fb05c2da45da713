// raise-delinearize: flat accesses a[q * m + r] with a symbolic row length m become affine
// accesses [q, r] on a view of the same memory where 0 <= r < m is proven; the others keep
// memref.load/store with the reason.
// RUN: polyflow-opt --pass 'raise-delinearize' %s | filecheck %s
// RUN: polyflow-opt --pass 'raise-delinearize' --debug-info %s | filecheck %s --check-prefix=LOC
// RUN: polyflow-opt --pass 'raise-delinearize,raise-delinearize' %s | filecheck %s --check-prefix=TWICE

// matmul over flat pointers, C[i*p + j] += A[i*m + k] * B[k*p + j]: one view per (memref, row
// length), made at the top level and shared by the load and the stores of C.
// CHECK-LABEL: func.func @matmul
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[DC:.*]] = memref.dim %arg0, %[[C0]] : memref<?xf64>
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[PC:.*]] = arith.maxsi %arg5, %[[C1]] : index
// CHECK-NEXT:    %[[SC:.*]] = arith.divui %[[DC]], %[[PC]] : index
// CHECK-NEXT:    %[[VC:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [%[[SC]], %arg5], strides: [%arg5, 1] : memref<?xf64> to memref<?x?xf64, strided<[?, 1]>>
// CHECK:         %[[VA:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [%{{.*}}, %arg4], strides: [%arg4, 1] : memref<?xf64> to memref<?x?xf64, strided<[?, 1]>>
// CHECK:         %[[VB:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [%{{.*}}, %arg5], strides: [%arg5, 1] : memref<?xf64> to memref<?x?xf64, strided<[?, 1]>>
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         affine.for %[[I:.*]] = 0 to %arg3 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to %arg5 {
// CHECK-NEXT:        affine.store %{{.*}}, %[[VC]][%[[I]], %[[J]]] : memref<?x?xf64, strided<[?, 1]>>
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to %arg4 {
// CHECK-NEXT:          %[[X:.*]] = affine.load %[[VC]][%[[I]], %[[J]]] : memref<?x?xf64, strided<[?, 1]>>
// CHECK-NEXT:          %[[Y:.*]] = affine.load %[[VA]][%[[I]], %[[K]]] : memref<?x?xf64, strided<[?, 1]>>
// CHECK-NEXT:          %[[Z:.*]] = affine.load %[[VB]][%[[K]], %[[J]]] : memref<?x?xf64, strided<[?, 1]>>
// CHECK-NEXT:          arith.mulf %[[Y]], %[[Z]] : f64
// CHECK-NEXT:          arith.addf
// CHECK-NEXT:          affine.store %{{.*}}, %[[VC]][%[[I]], %[[J]]] : memref<?x?xf64, strided<[?, 1]>>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    return
// CHECK-NOT:   polyflow.not_affine
// LOC-LABEL: func.func @matmul
// LOC:         memref.dim %arg0{{.*}} loc([[STORE0:#loc[0-9]+]])
// LOC:         memref.reinterpret_cast %arg0{{.*}} loc([[STORE0]])
// LOC:         affine.store %{{.*}}, %{{.*}} : memref<?x?xf64, strided<[?, 1]>> loc([[STORE0]])
// LOC-DAG:   [[STORE0]] = loc("S1"([[FILE:#loc[0-9]+]]))
// LOC-DAG:   [[FILE]] = loc("mm.c":4:7)
// TWICE-LABEL: func.func @matmul
// TWICE-COUNT-3: memref.reinterpret_cast
// TWICE-NOT:     memref.reinterpret_cast
// TWICE:         return
func.func @matmul(%C: memref<?xf64>, %A: memref<?xf64>, %B: memref<?xf64>, %n: index, %m: index, %p: index) {
  %zero = arith.constant 0.0 : f64
  affine.for %i = 0 to %n {
    %ip = arith.muli %i, %p : index
    %im = arith.muli %i, %m : index
    affine.for %j = 0 to %p {
      %c = arith.addi %ip, %j : index
      memref.store %zero, %C[%c] {polyflow.not_affine = "subscript 0 is not affine: product of a loop counter and a symbol"} : memref<?xf64> loc("S1"("mm.c":4:7))
      affine.for %k = 0 to %m {
        %x = memref.load %C[%c] : memref<?xf64>
        %a = arith.addi %im, %k : index
        %y = memref.load %A[%a] : memref<?xf64>
        %kp = arith.muli %k, %p : index
        %b = arith.addi %kp, %j : index
        %z = memref.load %B[%b] : memref<?xf64>
        %yz = arith.mulf %y, %z : f64
        %s = arith.addf %x, %yz : f64
        memref.store %s, %C[%c] : memref<?xf64>
      }
    }
  }
  return
}

// Three dimensions, a[(i*m + j)*p + k]: strides [m*p, p, 1], subscripts [i, j, k].
// CHECK-LABEL: func.func @three_d
// CHECK:         %[[MP:.*]] = arith.muli %arg2, %arg3 : index
// CHECK:         %[[V:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [%{{.*}}, %arg2, %arg3], strides: [%[[MP]], %arg3, 1] : memref<?xf32> to memref<?x?x?xf32, strided<[?, ?, 1]>>
// CHECK:         affine.for %[[I:.*]] = 0 to %arg1 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to %arg2 {
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to %arg3 {
// CHECK-NEXT:          %[[X:.*]] = affine.load %[[V]][%[[I]], %[[J]], %[[K]]] : memref<?x?x?xf32, strided<[?, ?, 1]>>
// CHECK-NEXT:          %[[Y:.*]] = arith.addf %[[X]], %[[X]] : f32
// CHECK-NEXT:          affine.store %[[Y]], %[[V]][%[[I]], %[[J]], %[[K]]] : memref<?x?x?xf32, strided<[?, ?, 1]>>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
func.func @three_d(%a: memref<?xf32>, %n: index, %m: index, %p: index) {
  affine.for %i = 0 to %n {
    %im = arith.muli %i, %m : index
    affine.for %j = 0 to %m {
      %row = arith.addi %im, %j : index
      %rowp = arith.muli %row, %p : index
      affine.for %k = 0 to %p {
        %x = arith.addi %rowp, %k : index
        %v = memref.load %a[%x] : memref<?xf32>
        %w = arith.addf %v, %v : f32
        memref.store %w, %a[%x] : memref<?xf32>
      }
    }
  }
  return
}

// `k + m*i` (the other order), an i32 row length cast inside the nest (the view and the map
// take a cast made at the top level), and `+ c` with `k < m - 2`: a[i*m + k + 2].
// CHECK-LABEL: func.func @order_and_offset
// CHECK-NEXT:    %[[M:.*]] = arith.index_cast %arg1 : i32 to index
// CHECK:         %[[V:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [%{{.*}}, %[[M]]], strides: [%[[M]], 1]
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         affine.for %[[I:.*]] = 0 to %arg2 {
// CHECK-NEXT:      affine.for %[[K:.*]] = 0 to %[[M]] {
// CHECK-NEXT:        affine.load %[[V]][%[[I]], %[[K]]] : memref<?x?xi32, strided<[?, 1]>>
// CHECK-NEXT:        arith.addi
// CHECK-NEXT:        affine.store %{{.*}}, %[[V]][%[[I]], %[[K]]] : memref<?x?xi32, strided<[?, 1]>>
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.for %[[K2:.*]] = 0 to #{{.*}}()[%[[M]]] {
// CHECK-NEXT:        affine.load %[[V]][%[[I]], %[[K2]] + 2] : memref<?x?xi32, strided<[?, 1]>>
// CHECK-NEXT:        affine.store %{{.*}}, %[[V]][%[[I]], %[[K2]]] : memref<?x?xi32, strided<[?, 1]>>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
func.func @order_and_offset(%a: memref<?xi32>, %m32: i32, %n: index) {
  %m = arith.index_cast %m32 : i32 to index
  affine.for %i = 0 to %n {
    affine.for %k = 0 to %m {
      %mi = arith.index_cast %m32 : i32 to index
      %im = arith.muli %mi, %i : index
      %x = arith.addi %k, %im : index
      %v = memref.load %a[%x] : memref<?xi32>
      %w = arith.addi %v, %v : i32
      memref.store %w, %a[%x] : memref<?xi32>
    }
    affine.for %k = 0 to affine_map<()[s0] -> (s0 - 2)>()[%m] {
      %im = arith.muli %i, %m : index
      %x = arith.addi %im, %k : index
      %c2 = arith.constant 2 : index
      %x2 = arith.addi %x, %c2 : index
      %v = memref.load %a[%x2] : memref<?xi32>
      memref.store %v, %a[%x] : memref<?xi32>
    }
  }
  return
}

// A reversed row, a[i*m + (m - 1 - k)], and a row past the one a loop counts, a[(i+1)*m + k]:
// the remainder is m - 1 - k, and k with the quotient i + 1.
// CHECK-LABEL: func.func @reversed_and_next_row
// CHECK:         affine.load %{{.*}}[%[[I:.*]], -%[[K:.*]] + symbol(%arg1) - 1]
// CHECK-NEXT:    affine.store %{{.*}}, %{{.*}}[%[[I]] + 1, %[[K]]]
func.func @reversed_and_next_row(%a: memref<?xf64>, %m: index, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %k = 0 to %m {
      %im = arith.muli %i, %m : index
      %c1 = arith.constant 1 : index
      %last = arith.subi %m, %c1 : index
      %r = arith.subi %last, %k : index
      %x = arith.addi %im, %r : index
      %v = memref.load %a[%x] : memref<?xf64>
      %i1 = arith.addi %i, %c1 : index
      %next = arith.muli %i1, %m : index
      %y = arith.addi %next, %k : index
      memref.store %v, %a[%y] : memref<?xf64>
    }
  }
  return
}

// NEGATIVES. `for k <= m`: k = m is the next row's first element, not a column.
// CHECK-LABEL: func.func @k_up_to_m
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         memref.load %arg0[%{{.*}}] {polyflow.not_affine = "subscript 0 is not affine: %{{.*}} * %arg1 + %{{.*}}, and %{{.*}} < %arg1 is not implied by the loop bounds"}
func.func @k_up_to_m(%a: memref<?xf64>, %m: index, %n: index) -> f64 {
  %zero = arith.constant 0.0 : f64
  %s = affine.for %i = 0 to %n iter_args(%acc = %zero) -> (f64) {
    %t = affine.for %k = 0 to affine_map<()[s0] -> (s0 + 1)>()[%m] iter_args(%acc2 = %acc) -> (f64) {
      %im = arith.muli %i, %m : index
      %x = arith.addi %im, %k : index
      %v = memref.load %a[%x] {polyflow.not_affine = "subscript 0 is not affine: product of a loop counter and a symbol"} : memref<?xf64>
      %r = arith.addf %acc2, %v : f64
      affine.yield %r : f64
    }
    affine.yield %t : f64
  }
  return %s : f64
}

// k counts to another symbol n: nothing says n <= m (both bounds fail for k - 1). And
// a[i*m + k - 1] with 0 <= k < m: k - 1 >= 0 fails at k = 0.
// CHECK-LABEL: func.func @k_to_other_symbol
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         memref.load %arg0[%{{.*}}] {polyflow.not_affine = "subscript 0 is not affine: %[[I:.*]] * %arg1 + %[[K:.*]], and %[[K]] < %arg1 is not implied by the loop bounds"}
// CHECK:         memref.store %{{.*}}, %arg0[%{{.*}}] {polyflow.not_affine = "subscript 0 is not affine: %[[I]] * %arg1 + %[[K]] - 1, and 0 <= %[[K]] - 1 < %arg1 is not implied by the loop bounds"}
// CHECK:         memref.store %{{.*}}, %arg0[%{{.*}}] {polyflow.not_affine = "subscript 0 is not affine: %[[I]] * %arg1 + %[[K2:.*]] - 1, and %[[K2]] - 1 >= 0 is not implied by the loop bounds"}
func.func @k_to_other_symbol(%a: memref<?xf64>, %m: index, %n: index, %f: f64) {
  %c1 = arith.constant 1 : index
  affine.for %i = 0 to %n {
    %im = arith.muli %i, %m : index
    affine.for %k = 0 to %n {
      %x = arith.addi %im, %k : index
      %v = memref.load %a[%x] : memref<?xf64>
      %y = arith.subi %x, %c1 : index
      memref.store %v, %a[%y] : memref<?xf64>
    }
    affine.for %k = 0 to %m {
      %x = arith.addi %im, %k : index
      %y = arith.subi %x, %c1 : index
      memref.store %f, %a[%y] : memref<?xf64>
    }
  }
  return
}

// m is loaded inside the loop nest (not a symbol): the reason of raise-scf-to-affine stays.
// CHECK-LABEL: func.func @m_inside_the_nest
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         memref.load %arg0[%{{.*}}] {polyflow.not_affine = "subscript 0 is not affine: loaded from memory inside the loop nest"}
func.func @m_inside_the_nest(%a: memref<?xf64>, %sizes: memref<?xindex>, %n: index) -> f64 {
  %zero = arith.constant 0.0 : f64
  %s = affine.for %i = 0 to %n iter_args(%acc = %zero) -> (f64) {
    %m = affine.load %sizes[%i] : memref<?xindex>
    %im = arith.muli %i, %m : index
    %v = memref.load %a[%im] {polyflow.not_affine = "subscript 0 is not affine: loaded from memory inside the loop nest"} : memref<?xf64>
    %r = arith.addf %acc, %v : f64
    affine.yield %r : f64
  }
  return %s : f64
}

// A row length computed inside the nest from a loop-carried value is no symbol either.
// CHECK-LABEL: func.func @m_carried
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         memref.load
// CHECK-NOT:     affine.load
func.func @m_carried(%a: memref<?xf64>, %m0: index, %n: index) -> index {
  %s = affine.for %i = 0 to %n iter_args(%m = %m0) -> (index) {
    affine.for %k = 0 to %m0 {
      %im = arith.muli %i, %m : index
      %x = arith.addi %im, %k : index
      %v = memref.load %a[%x] : memref<?xf64>
    }
    affine.yield %m : index
  }
  return %s : index
}

// A memref with a non-identity layout (its offset would be lost), and a 2-D memref: declined.
// CHECK-LABEL: func.func @layouts
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         memref.load %arg0[%{{.*}}] {polyflow.not_affine = "subscript 0 is not affine: %{{.*}} * %arg2 + %{{.*}}, and the memref's layout strided<[1], offset: ?> is not the identity"}
// CHECK:         memref.load %arg1[%{{.*}}, %{{.*}}] : memref<?x?xf64>
func.func @layouts(%a: memref<?xf64, strided<[1], offset: ?>>, %b: memref<?x?xf64>, %m: index, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %k = 0 to %m {
      %im = arith.muli %i, %m : index
      %x = arith.addi %im, %k : index
      %v = memref.load %a[%x] : memref<?xf64, strided<[1], offset: ?>>
      %w = memref.load %b[%i, %x] : memref<?x?xf64>
    }
  }
  return
}

// A constant row length is affine already: a linear memref.load is no case for this pass.
// CHECK-LABEL: func.func @constant_row
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         memref.load %arg0[%{{.*}}] {polyflow.not_affine = "kept"}
func.func @constant_row(%a: memref<?xf64>, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %k = 0 to 8 {
      %c8 = arith.constant 8 : index
      %im = arith.muli %i, %c8 : index
      %x = arith.addi %im, %k : index
      %v = memref.load %a[%x] {polyflow.not_affine = "kept"} : memref<?xf64>
    }
  }
  return
}

// An i32 symbol in the quotient, a[(i + s)*m + k], cast only inside the nest: the map takes a
// cast made at the top level.
// CHECK-LABEL: func.func @i32_symbol_in_quotient
// CHECK:         %[[V:.*]] = memref.reinterpret_cast %arg0
// CHECK-NEXT:    %[[S:.*]] = arith.index_cast %arg2 : i32 to index
// CHECK-NEXT:    affine.for
// CHECK:         affine.load %[[V]][%{{.*}} + symbol(%[[S]]), %{{.*}}]
func.func @i32_symbol_in_quotient(%a: memref<?xf64>, %m: index, %s32: i32, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %k = 0 to %m {
      %s = arith.index_cast %s32 : i32 to index
      %row = arith.addi %i, %s : index
      %rm = arith.muli %row, %m : index
      %x = arith.addi %rm, %k : index
      %v = memref.load %a[%x] : memref<?xf64>
    }
  }
  return
}
