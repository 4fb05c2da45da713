// raise-reductions: memory updated at a loop-invariant address → iter_args; reductions marked.
// RUN: polyflow-opt --pass 'raise-reductions' %s | filecheck %s
// RUN: polyflow-opt --pass 'raise-reductions{guard=false}' %s | filecheck %s --check-prefix=NOGUARD
// RUN: polyflow-opt --pass 'raise-reductions' --debug-info %s | filecheck %s --check-prefix=LOC

#id = affine_map<(d0) -> (d0)>
#late = affine_set<(d0) : (d0 - 3 >= 0)>

// matmul ijk: the k loop carries C[i][j]; constant bounds, so no guard.
// CHECK-LABEL: func.func @matmul
// CHECK:      affine.for %[[I:.*]] = 0 to 8 {
// CHECK-NEXT:   affine.for %[[J:.*]] = 0 to 8 {
// CHECK-NEXT:     %[[INIT:.*]] = affine.load %arg2[%[[I]], %[[J]]] : memref<8x8xf32>
// CHECK-NEXT:     %[[R:.*]] = affine.for %[[K:.*]] = 0 to 8 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT:       affine.load %arg0[%[[I]], %[[K]]]
// CHECK-NEXT:       affine.load %arg1[%[[K]], %[[J]]]
// CHECK-NEXT:       %[[P:.*]] = arith.mulf
// CHECK-NEXT:       %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:       affine.yield %[[S]] : f32
// CHECK-NEXT:     } {polyflow.reductions = ["add"]}
// CHECK-NEXT:     affine.store %[[R]], %arg2[%[[I]], %[[J]]] : memref<8x8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// LOC-LABEL: func.func @matmul
// LOC: affine.load %arg2{{.*}} loc([[LOAD:#loc[0-9]+]])
// LOC: affine.store {{.*}} loc([[STORE:#loc[0-9]+]])
func.func @matmul(%A: memref<8x8xf32>, %B: memref<8x8xf32>, %C: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 8 {
      affine.for %k = 0 to 8 {
        %a = affine.load %A[%i, %k] : memref<8x8xf32>
        %b = affine.load %B[%k, %j] : memref<8x8xf32>
        %c = affine.load %C[%i, %j] : memref<8x8xf32> loc("S1"("mm.c":5:17))
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<8x8xf32> loc("S1"("mm.c":5:9))
      }
    }
  }
  return
}

// Dot product into s[0] with a symbolic trip count: guarded by `n >= 1`; without the guard
// option the location stays in memory.
// CHECK-LABEL: func.func @dot
// CHECK-NEXT:   affine.if #{{.*}}()[%arg2] {
// CHECK-NEXT:     %[[INIT:.*]] = affine.load %arg1[0] : memref<1xf32>
// CHECK-NEXT:     %[[R:.*]] = affine.for %{{.*}} = 0 to %arg2 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT:       %[[X:.*]] = affine.load %arg0
// CHECK-NEXT:       %[[S:.*]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK-NEXT:       affine.yield %[[S]] : f32
// CHECK-NEXT:     } {polyflow.reductions = ["add"]}
// CHECK-NEXT:     affine.store %[[R]], %arg1[0] : memref<1xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   return
// NOGUARD-LABEL: func.func @dot
// NOGUARD-NOT:   iter_args
// NOGUARD:       return
func.func @dot(%a: memref<?xf32>, %s: memref<1xf32>, %n: index) {
  affine.for %i = 0 to %n {
    %x = affine.load %a[%i] : memref<?xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %r = arith.addf %acc, %x : f32
    affine.store %r, %s[0] : memref<1xf32>
  }
  return
}

// The inner loop provably runs wherever it is reached (0 <= i < n around it: n >= 1), so it
// needs no guard, with or without the option.
// CHECK-LABEL: func.func @same_bounds
// CHECK:       affine.for %[[I:.*]] = 0 to %arg2 {
// CHECK-NEXT:    affine.load %arg1[%[[I]]]
// CHECK-NEXT:    affine.for {{.*}} = 0 to %arg2 iter_args
// CHECK:         } {polyflow.reductions = ["add"]}
// CHECK-NEXT:    affine.store
// CHECK-NEXT:  }
// NOGUARD-LABEL: func.func @same_bounds
// NOGUARD:       affine.for {{.*}} = 0 to %arg2 iter_args
func.func @same_bounds(%a: memref<?x?xf32>, %y: memref<?xf32>, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to %n {
      %x = affine.load %a[%i, %j] : memref<?x?xf32>
      %acc = affine.load %y[%i] : memref<?xf32>
      %r = arith.addf %acc, %x : f32
      affine.store %r, %y[%i] : memref<?xf32>
    }
  }
  return
}

// gemm: the k loop (over m, unrelated to n) may be empty, but C[i][j] is read and written just
// before it, so loading it before and storing it after is harmless: no guard. In @call_between
// the access after the loop comes after a call (which may never return): guarded.
// CHECK-LABEL: func.func @beside
// CHECK-NOT:   affine.if
// CHECK:       affine.for {{.*}} = 0 to %arg4 iter_args
// CHECK-NOT:   affine.if
// CHECK:       return
// CHECK-LABEL: func.func @call_between
// CHECK:       affine.if
// CHECK-NEXT:    affine.load %arg2
// CHECK-NEXT:    affine.for {{.*}} = 0 to %arg4 iter_args
// NOGUARD-LABEL: func.func @beside
// NOGUARD:       iter_args
// NOGUARD-LABEL: func.func @call_between
// NOGUARD-NOT:   iter_args
// NOGUARD:       return
func.func @beside(%A: memref<?x?xf64>, %B: memref<?x?xf64>, %C: memref<?x?xf64>, %n: index, %m: index, %beta: f64) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to %n {
      %c0 = affine.load %C[%i, %j] : memref<?x?xf64>
      %c1 = arith.mulf %c0, %beta : f64
      affine.store %c1, %C[%i, %j] : memref<?x?xf64>
      affine.for %k = 0 to %m {
        %a = affine.load %A[%i, %k] : memref<?x?xf64>
        %b = affine.load %B[%k, %j] : memref<?x?xf64>
        %c = affine.load %C[%i, %j] : memref<?x?xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %c, %p : f64
        affine.store %s, %C[%i, %j] : memref<?x?xf64>
      }
    }
  }
  return
}
func.func private @h()
func.func @call_between(%A: memref<?x?xf64>, %B: memref<?x?xf64>, %C: memref<?x?xf64>, %n: index, %m: index, %beta: f64) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to %n {
      affine.for %k = 0 to %m {
        %a = affine.load %A[%i, %k] : memref<?x?xf64>
        %b = affine.load %B[%k, %j] : memref<?x?xf64>
        %c = affine.load %C[%i, %j] : memref<?x?xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %c, %p : f64
        affine.store %s, %C[%i, %j] : memref<?x?xf64>
      }
      func.call @h() : () -> ()
      %c0 = affine.load %C[%i, %j] : memref<?x?xf64>
      %c1 = arith.mulf %c0, %beta : f64
      affine.store %c1, %C[%i, %j] : memref<?x?xf64>
    }
  }
  return
}

// Max via select (`x > m ? x : m`), into a 0-d memref.
// CHECK-LABEL: func.func @max_select
// CHECK:       affine.load %arg1[] : memref<f32>
// CHECK:       affine.for {{.*}} iter_args(%[[ACC:.*]] = {{.*}}) -> (f32) {
// CHECK:         %[[C:.*]] = arith.cmpf ogt, %[[X:.*]], %[[ACC]] : f32
// CHECK-NEXT:    %[[M:.*]] = arith.select %[[C]], %[[X]], %[[ACC]] : f32
// CHECK-NEXT:    affine.yield %[[M]] : f32
// CHECK-NEXT:  } {polyflow.reductions = ["max"]}
func.func @max_select(%a: memref<100xf32>, %m: memref<f32>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xf32>
    %acc = affine.load %m[] : memref<f32>
    %c = arith.cmpf ogt, %x, %acc : f32
    %r = arith.select %c, %x, %acc : f32
    affine.store %r, %m[] : memref<f32>
  }
  return
}

// `x > m ? m : x` is a min; so is `m <= x ? m : x` (integer, signed).
// CHECK-LABEL: func.func @min_select_int
// CHECK:       } {polyflow.reductions = ["min", "min"]}
func.func @min_select_int(%a: memref<100xi32>, %m: memref<2xi32>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xi32>
    %acc = affine.load %m[0] : memref<2xi32>
    %c = arith.cmpi sgt, %x, %acc : i32
    %r = arith.select %c, %acc, %x : i32
    affine.store %r, %m[0] : memref<2xi32>
    %acc1 = affine.load %m[1] : memref<2xi32>
    %c1 = arith.cmpi sle, %acc1, %x : i32
    %r1 = arith.select %c1, %acc1, %x : i32
    affine.store %r1, %m[1] : memref<2xi32>
  }
  return
}

// Min via minimumf, product via mulf, and existing iter_args (an scf.for's too) are marked.
// CHECK-LABEL: func.func @min_product
// CHECK:       } {polyflow.reductions = ["min", "mul"]}
func.func @min_product(%a: memref<100xf64>, %s: memref<2xf64>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xf64>
    %lo = affine.load %s[0] : memref<2xf64>
    %m = arith.minimumf %lo, %x : f64
    affine.store %m, %s[0] : memref<2xf64>
    %p = affine.load %s[1] : memref<2xf64>
    %q = arith.mulf %x, %p : f64
    affine.store %q, %s[1] : memref<2xf64>
  }
  return
}

// An integer sum over two loops: the inner loop carries it, then the outer one through it.
// CHECK-LABEL: func.func @int_sum
// CHECK-NEXT:    %[[INIT:.*]] = affine.load %arg1[0] : memref<1xi64>
// CHECK-NEXT:    %[[R:.*]] = affine.for %{{.*}} = 0 to 10 iter_args(%[[OUTER:.*]] = %[[INIT]]) -> (i64) {
// CHECK-NEXT:      %[[IN:.*]] = affine.for %{{.*}} = 0 to 20 iter_args(%[[ACC:.*]] = %[[OUTER]]) -> (i64) {
// CHECK-NEXT:        affine.load %arg0
// CHECK-NEXT:        arith.addi {{.*}}%[[ACC]]
// CHECK-NEXT:        affine.yield
// CHECK-NEXT:      } {polyflow.reductions = ["add"]}
// CHECK-NEXT:      affine.yield %[[IN]] : i64
// CHECK-NEXT:    } {polyflow.reductions = ["add"]}
// CHECK-NEXT:    affine.store %[[R]], %arg1[0] : memref<1xi64>
func.func @int_sum(%a: memref<10x20xi64>, %s: memref<1xi64>) {
  affine.for %i = 0 to 10 {
    affine.for %j = 0 to 20 {
      %x = affine.load %a[%i, %j] : memref<10x20xi64>
      %acc = affine.load %s[0] : memref<1xi64>
      %r = arith.addi %x, %acc : i64
      affine.store %r, %s[0] : memref<1xi64>
    }
  }
  return
}

// Existing iter_args: `acc - x` counts as add; an scf.for gets marked too; a pass-through is none.
// CHECK-LABEL: func.func @existing
// CHECK:       } {polyflow.reductions = ["add", "xor", "none"]}
// CHECK:       } {polyflow.reductions = ["or"]}
func.func @existing(%a: memref<100xf32>, %b: memref<100xi32>, %lb: index, %ub: index) -> (f32, i32, i32) {
  %z = arith.constant 0.0 : f32
  %zi = arith.constant 0 : i32
  %r:3 = affine.for %i = 0 to 100 iter_args(%p = %z, %q = %zi, %t = %zi) -> (f32, i32, i32) {
    %x = affine.load %a[%i] : memref<100xf32>
    %y = affine.load %b[%i] : memref<100xi32>
    %p2 = arith.subf %p, %x : f32
    %q2 = arith.xori %y, %q : i32
    affine.yield %p2, %q2, %t : f32, i32, i32
  }
  %o = scf.for %j = %lb to %ub step %lb iter_args(%u = %zi) -> (i32) {
    %v = arith.index_cast %j : index to i32
    %u2 = arith.ori %u, %v : i32
    scf.yield %u2 : i32
  }
  return %r#0, %r#1, %o : f32, i32, i32
}

// lu: A[i][k] (k < j) and A[k][j] (k < j < i) never meet A[i][j]; the first k loop may be
// empty (j = 0) but A[i][j] is accessed right after it, so it needs no guard; the second one
// (k < i, i = 0 possible, nothing around) is guarded.
// CHECK-LABEL: func.func @lu
// CHECK:       affine.for %[[I:.*]] = 0 to %arg1 {
// CHECK-NEXT:    affine.for %[[J:.*]] = 0 to #{{.*}}(%[[I]]) {
// CHECK-NEXT:      affine.load %arg0[%[[I]], %[[J]]]
// CHECK-NEXT:      affine.for %{{.*}} = 0 to #{{.*}}(%[[J]]) iter_args
// CHECK:           } {polyflow.reductions = ["add"]}
// CHECK-NEXT:      affine.store {{.*}}, %arg0[%[[I]], %[[J]]]
// CHECK:         affine.for %[[J2:.*]] = #{{.*}}(%[[I]]) to %arg1 {
// CHECK-NEXT:      affine.if #{{.*}}(%[[I]]) {
// CHECK-NEXT:        affine.load %arg0[%[[I]], %[[J2]]]
// CHECK-NEXT:        affine.for %{{.*}} = 0 to #{{.*}}(%[[I]]) iter_args
// CHECK:             } {polyflow.reductions = ["add"]}
// CHECK-NEXT:        affine.store {{.*}}, %arg0[%[[I]], %[[J2]]]
// CHECK-NEXT:      }
func.func @lu(%A: memref<10x10xf64>, %n: index) {
  affine.for %i = 0 to %n {
    affine.for %j = 0 to #id(%i) {
      affine.for %k = 0 to #id(%j) {
        %a = affine.load %A[%i, %k] : memref<10x10xf64>
        %b = affine.load %A[%k, %j] : memref<10x10xf64>
        %c = affine.load %A[%i, %j] : memref<10x10xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.subf %c, %p : f64
        affine.store %s, %A[%i, %j] : memref<10x10xf64>
      }
      %c = affine.load %A[%i, %j] : memref<10x10xf64>
      %d = affine.load %A[%j, %j] : memref<10x10xf64>
      %q = arith.divf %c, %d : f64
      affine.store %q, %A[%i, %j] : memref<10x10xf64>
    }
    affine.for %j = #id(%i) to %n {
      affine.for %k = 0 to #id(%i) {
        %a = affine.load %A[%i, %k] : memref<10x10xf64>
        %b = affine.load %A[%k, %j] : memref<10x10xf64>
        %c = affine.load %A[%i, %j] : memref<10x10xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.subf %c, %p : f64
        affine.store %s, %A[%i, %j] : memref<10x10xf64>
      }
    }
  }
  return
}

// trmm: B[k][j] with k > i never meets B[i][j]; the k loop is empty for i = 9, but B[i][j] is
// read and written right after it, so it needs no guard.
// CHECK-LABEL: func.func @trmm
// CHECK-NOT:   affine.if
// CHECK:       affine.for %{{.*}} = #{{.*}}(%{{.*}}) to 10 iter_args
// CHECK:       } {polyflow.reductions = ["add"]}
// CHECK-NOT:   affine.if
// CHECK:       return
func.func @trmm(%A: memref<10x10xf64>, %B: memref<10x10xf64>, %alpha: f64) {
  affine.for %i = 0 to 10 {
    affine.for %j = 0 to 10 {
      affine.for %k = affine_map<(d0) -> (d0 + 1)>(%i) to 10 {
        %a = affine.load %A[%k, %i] : memref<10x10xf64>
        %b = affine.load %B[%k, %j] : memref<10x10xf64>
        %p = arith.mulf %a, %b : f64
        %c = affine.load %B[%i, %j] : memref<10x10xf64>
        %s = arith.addf %c, %p : f64
        affine.store %s, %B[%i, %j] : memref<10x10xf64>
      }
      %c = affine.load %B[%i, %j] : memref<10x10xf64>
      %s = arith.mulf %alpha, %c : f64
      affine.store %s, %B[%i, %j] : memref<10x10xf64>
    }
  }
  return
}

// Other accesses under affine.if: the then branch has k > j, the else branch of `k >= 5` has
// k < 5 <= j, so neither meets A[i][j].
// CHECK-LABEL: func.func @under_ifs
// CHECK:       affine.for {{.*}} iter_args
// CHECK:       } {polyflow.reductions = ["add"]}
func.func @under_ifs(%A: memref<10x10xf32>, %n: index) {
  affine.for %i = 0 to 10 {
    affine.for %j = 5 to 10 {
      affine.for %k = 0 to 10 {
        affine.if affine_set<(d0, d1)[s0] : (d0 - d1 - 1 >= 0, s0 - d0 == 0)>(%k, %j)[%n] {
          %a = affine.load %A[%i, %k] : memref<10x10xf32>
          affine.store %a, %A[%i, %k] : memref<10x10xf32>
        }
        affine.if affine_set<(d0) : (d0 - 5 >= 0)>(%k) {
        } else {
          %a = affine.load %A[%i, %k] : memref<10x10xf32>
          affine.store %a, %A[%i, %k] : memref<10x10xf32>
        }
        %c = affine.load %A[%i, %j] : memref<10x10xf32>
        %x = arith.constant 1.0 : f32
        %s = arith.addf %c, %x : f32
        affine.store %s, %A[%i, %j] : memref<10x10xf32>
      }
    }
  }
  return
}

// The same with the else branch's access at k + 5, which may be j.
// CHECK-LABEL: func.func @under_ifs_clash
// CHECK-NOT:   iter_args
// CHECK:       return
func.func @under_ifs_clash(%A: memref<10x20xf32>) {
  affine.for %i = 0 to 10 {
    affine.for %j = 5 to 10 {
      affine.for %k = 0 to 10 {
        affine.if affine_set<(d0) : (d0 - 5 >= 0)>(%k) {
        } else {
          %a = affine.load %A[%i, %k + 5] : memref<10x20xf32>
          affine.store %a, %A[%i, %k + 5] : memref<10x20xf32>
        }
        %c = affine.load %A[%i, %j] : memref<10x20xf32>
        %x = arith.constant 1.0 : f32
        %s = arith.addf %c, %x : f32
        affine.store %s, %A[%i, %j] : memref<10x20xf32>
      }
    }
  }
  return
}

// Two locations of one memref at constant distinct addresses, s[0] updated twice per iteration:
// later loads see the value stored before them.
// CHECK-LABEL: func.func @two_updates
// CHECK:       iter_args(%[[S0:.*]] = %{{.*}}, %[[S1:.*]] = %{{.*}}) -> (f32, f32) {
// CHECK-NEXT:    %[[X:.*]] = affine.load %arg0
// CHECK-NEXT:    %[[A:.*]] = arith.addf %[[S0]], %[[X]]
// CHECK-NEXT:    %[[B:.*]] = arith.mulf %[[S1]], %[[X]]
// CHECK-NEXT:    %[[C:.*]] = arith.addf %[[A]], %[[X]]
// CHECK-NEXT:    affine.yield %[[C]], %[[B]] : f32, f32
// CHECK-NEXT:  } {polyflow.reductions = ["add", "mul"]}
func.func @two_updates(%a: memref<100xf32>, %s: memref<2xf32>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xf32>
    %s0 = affine.load %s[0] : memref<2xf32>
    %r0 = arith.addf %s0, %x : f32
    affine.store %r0, %s[0] : memref<2xf32>
    %s1 = affine.load %s[1] : memref<2xf32>
    %r1 = arith.mulf %s1, %x : f32
    affine.store %r1, %s[1] : memref<2xf32>
    %again = affine.load %s[0] : memref<2xf32>
    %r2 = arith.addf %again, %x : f32
    affine.store %r2, %s[0] : memref<2xf32>
  }
  return
}

// ---- Negative: these stay as they are.

// The store happens only in some iterations.
// CHECK-LABEL: func.func @store_under_if
// CHECK-NOT:   iter_args
// CHECK:       affine.if
// CHECK-NEXT:    affine.store
// CHECK:       return
func.func @store_under_if(%a: memref<100xf32>, %s: memref<1xf32>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %r = arith.addf %acc, %x : f32
    affine.if #late(%i) {
      affine.store %r, %s[0] : memref<1xf32>
    }
  }
  return
}

// A[i][k] meets A[i][j] when k = j: k is not bounded by j.
// CHECK-LABEL: func.func @may_interfere
// CHECK-NOT:   iter_args
// CHECK:       return
func.func @may_interfere(%A: memref<10x10xf32>) {
  affine.for %i = 0 to 10 {
    affine.for %j = 0 to 10 {
      affine.for %k = 0 to 10 {
        %a = affine.load %A[%i, %k] : memref<10x10xf32>
        %c = affine.load %A[%i, %j] : memref<10x10xf32>
        %s = arith.addf %c, %a : f32
        affine.store %s, %A[%i, %j] : memref<10x10xf32>
      }
    }
  }
  return
}

// A view of the same array may be anything.
// CHECK-LABEL: func.func @through_a_view
// CHECK-NOT:   iter_args
// CHECK:       return
func.func @through_a_view(%A: memref<10xf32>) {
  %v = memref.subview %A[2] [4] [1] : memref<10xf32> to memref<4xf32, strided<[1], offset: 2>>
  affine.for %i = 0 to 4 {
    %a = affine.load %v[%i] : memref<4xf32, strided<[1], offset: 2>>
    %c = affine.load %A[0] : memref<10xf32>
    %s = arith.addf %c, %a : f32
    affine.store %s, %A[0] : memref<10xf32>
  }
  return
}

func.func private @g(f32)

// A call may read or write anything.
// CHECK-LABEL: func.func @call_in_body
// CHECK-NOT:   iter_args
// CHECK:       return
func.func @call_in_body(%a: memref<100xf32>, %s: memref<1xf32>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %r = arith.addf %acc, %x : f32
    affine.store %r, %s[0] : memref<1xf32>
    func.call @g(%r) : (f32) -> ()
  }
  return
}

// The address depends on the loop's IV.
// CHECK-LABEL: func.func @address_varies
// CHECK-NOT:   iter_args
// CHECK:       return
func.func @address_varies(%a: memref<100xf32>, %s: memref<100xf32>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xf32>
    %acc = affine.load %s[%i] : memref<100xf32>
    %r = arith.addf %acc, %x : f32
    affine.store %r, %s[%i] : memref<100xf32>
  }
  return
}

// ---- Loop-carried but no reduction: promoted, marked none.

// The running sum is also stored elsewhere each iteration (a prefix sum).
// CHECK-LABEL: func.func @second_use
// CHECK:       affine.for {{.*}} iter_args
// CHECK:         affine.store %{{.*}}, %arg1[
// CHECK:       } {polyflow.reductions = ["none"]}
func.func @second_use(%a: memref<100xf32>, %b: memref<100xf32>, %s: memref<1xf32>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %r = arith.addf %acc, %x : f32
    affine.store %r, %s[0] : memref<1xf32>
    affine.store %r, %b[%i] : memref<100xf32>
  }
  return
}

// acc = acc * 0.5 + x mixes two operations.
// CHECK-LABEL: func.func @not_associative
// CHECK:       affine.for {{.*}} iter_args
// CHECK:       } {polyflow.reductions = ["none"]}
func.func @not_associative(%a: memref<100xf32>, %s: memref<1xf32>) {
  %h = arith.constant 0.5 : f32
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xf32>
    %acc = affine.load %s[0] : memref<1xf32>
    %m = arith.mulf %acc, %h : f32
    %r = arith.addf %m, %x : f32
    affine.store %r, %s[0] : memref<1xf32>
  }
  return
}

// x - acc is not a reduction of acc.
// CHECK-LABEL: func.func @subtract_from
// CHECK:       } {polyflow.reductions = ["none"]}
func.func @subtract_from(%a: memref<100xi32>, %s: memref<1xi32>) {
  affine.for %i = 0 to 100 {
    %x = affine.load %a[%i] : memref<100xi32>
    %acc = affine.load %s[0] : memref<1xi32>
    %r = arith.subi %x, %acc : i32
    affine.store %r, %s[0] : memref<1xi32>
  }
  return
}

// The hoisted load and the sunk store keep the statement locations of the ops they replace.
// LOC: [[SRC_LOAD:#loc[0-9]+]] = loc("mm.c":5:17)
// LOC: [[SRC_STORE:#loc[0-9]+]] = loc("mm.c":5:9)
// LOC: [[LOAD]] = loc("S1"([[SRC_LOAD]]))
// LOC: [[STORE]] = loc("S1"([[SRC_STORE]]))
