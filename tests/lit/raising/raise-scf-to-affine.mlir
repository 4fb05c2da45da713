// raise-scf-to-affine: scf.for/if and memref accesses become affine where provably legal; the
// rest keeps scf/memref with `polyflow.not_affine` saying why.
// RUN: polyflow-opt --pass 'raise-scf-to-affine' %s | filecheck %s
// RUN: polyflow-opt --pass 'raise-scf-to-affine{speculate_loads=false}' %s | filecheck %s --check-prefix=NOSPEC
// RUN: polyflow-opt --pass 'raise-scf-to-affine,raise-scf-to-affine' %s | filecheck %s --check-prefix=TWICE

// CHECK-DAG: #[[PLUS1:.*]] = affine_map<(d0) -> (d0 + 1)>
// CHECK-DAG: #[[MIN:.*]] = affine_map<(d0)[s0] -> (s0, d0 + 4)>
// CHECK-DAG: #[[MAX:.*]] = affine_map<(d0) -> (0, d0 - 2)>
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[MINSEL:.*]] = affine_map<(d0)[s0] -> (d0, s0)>
// CHECK-DAG: #[[TRIPS:.*]] = affine_map<()[s0] -> ((s0 + 1) floordiv 2)>
// Sets of @conditions: i >= 1 && i < m; i < 5, i > m (the ||); i < m (the !=, with i > m);
// i == 3; !(i >= 2 && i < 7) = i < 2 || i >= 7; @if_results: i != 3 = i >= 4 || i <= 2.
// CHECK-DAG: #{{.*}} = affine_set<(d0)[s0] : (d0 - 1 >= 0, -d0 + s0 - 1 >= 0)>
// CHECK-DAG: #{{.*}} = affine_set<(d0) : (-d0 + 4 >= 0)>
// CHECK-DAG: #{{.*}} = affine_set<(d0)[s0] : (d0 - s0 - 1 >= 0)>
// CHECK-DAG: #{{.*}} = affine_set<(d0)[s0] : (-d0 + s0 - 1 >= 0)>
// CHECK-DAG: #{{.*}} = affine_set<(d0) : (d0 - 3 == 0)>
// CHECK-DAG: #{{.*}} = affine_set<(d0) : (-d0 + 1 >= 0)>
// CHECK-DAG: #{{.*}} = affine_set<(d0) : (d0 - 7 >= 0)>
// CHECK-DAG: #{{.*}} = affine_set<(d0) : (d0 - 4 >= 0)>
// CHECK-DAG: #{{.*}} = affine_set<(d0) : (-d0 + 2 >= 0)>

// Rectangular nest over i32 bounds: the index_cast at the top level is a symbol.
// CHECK-LABEL: func.func @rectangular
// CHECK-NEXT:    %[[N:.*]] = arith.index_cast %arg0 : i32 to index
// CHECK-NEXT:    %[[M:.*]] = arith.index_cast %arg1 : i32 to index
// CHECK-NEXT:    affine.for %[[I:.*]] = 0 to %[[N]] {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to %[[M]] {
// CHECK-NEXT:        %[[V:.*]] = affine.load %arg2[%[[I]], %[[J]]] : memref<20x30xf64>
// CHECK-NEXT:        %[[W:.*]] = arith.mulf %[[V]], %arg3 : f64
// CHECK-NEXT:        affine.store %[[W]], %arg2[%[[I]], %[[J]]] : memref<20x30xf64>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    return
func.func @rectangular(%n: i32, %m: i32, %A: memref<20x30xf64>, %beta: f64) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %0 = arith.index_cast %n : i32 to index
  %1 = arith.index_cast %m : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    scf.for %j = %c0 to %1 step %c1 {
      %v = memref.load %A[%i, %j] : memref<20x30xf64>
      %w = arith.mulf %v, %beta : f64
      memref.store %w, %A[%i, %j] : memref<20x30xf64>
    }
  }
  return
}

// Triangular bounds (j = i .. n, k = j + 1 .. n), constant step 2.
// CHECK-LABEL: func.func @triangular
// CHECK:         affine.for %[[I:.*]] = 0 to %[[N:.*]] {
// CHECK-NEXT:      affine.for %[[J:.*]] = #[[ID]](%[[I]]) to %[[N]] {
// CHECK-NEXT:        affine.for %[[K:.*]] = #[[PLUS1]](%[[J]]) to %[[N]] step 2 {
// CHECK-NEXT:          affine.store %cst, %arg1[%[[J]], %[[K]]] : memref<40x40xf64>
func.func @triangular(%n: i32, %A: memref<40x40xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cst = arith.constant 0.0 : f64
  %0 = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    scf.for %j = %i to %0 step %c1 {
      %j1 = arith.addi %j, %c1 : index
      scf.for %k = %j1 to %0 step %c2 {
        memref.store %cst, %A[%j, %k] : memref<40x40xf64>
      }
    }
  }
  return
}

// min in an upper bound, max in a lower bound: multi-result maps. The frontend's C ternary
// `i < m ? i : m` is a select of a compare in i32.
// CHECK-LABEL: func.func @min_max_bounds
// CHECK:         affine.for %[[I:.*]] = 0 to %[[N:.*]] {
// CHECK-NEXT:      affine.for %[[J:.*]] = max #[[MAX]](%[[I]]) to min #[[MIN]](%[[I]])[%[[N]]] {
// CHECK-NEXT:        affine.store %cst, %arg1[%[[I]], %[[J]]] : memref<40x40xf64>
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.for %[[J2:.*]] = 0 to min #[[MINSEL]](%[[I]])[%[[M:.*]]] {
// CHECK-NEXT:        affine.store %cst, %arg1[%[[I]], %[[J2]]] : memref<40x40xf64>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
func.func @min_max_bounds(%n: i32, %A: memref<40x40xf64>, %m: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %cst = arith.constant 0.0 : f64
  %0 = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    %lo = arith.subi %i, %c2 : index
    %lb = arith.maxsi %c0, %lo : index
    %hi = arith.addi %i, %c4 : index
    %ub = arith.minsi %0, %hi : index
    scf.for %j = %lb to %ub step %c1 {
      memref.store %cst, %A[%i, %j] : memref<40x40xf64>
    }
    %ii = arith.index_cast %i : index to i32
    %lt = arith.cmpi slt, %ii, %m : i32
    %sel = arith.select %lt, %ii, %m : i32
    %ub2 = arith.index_cast %sel : i32 to index
    scf.for %j = %c0 to %ub2 step %c1 {
      memref.store %cst, %A[%i, %j] : memref<40x40xf64>
    }
  }
  return
}

// Subscripts through i32 (index_cast/extsi/trunci), muli by a constant, a symbol, memref.dim,
// floordivsi, divsi/remsi of a value proven non-negative, and a decreasing C loop the frontend
// normalized (i = n - 1 - 2k), whose divsi is provably of a non-negative value.
// CHECK-LABEL: func.func @subscripts
// CHECK:         affine.for %[[I:.*]] = 0 to %[[N:.*]] {
// CHECK-NEXT:      %[[V:.*]] = affine.load %arg1[%[[I]] * 2 + 1] : memref<?xf64>
// CHECK-NEXT:      affine.store %[[V]], %arg1[%[[I]] + symbol(%[[N]])] : memref<?xf64>
// CHECK-NEXT:      affine.store %[[V]], %arg1[%[[I]] + symbol(%[[DIM:.*]]) - 1] : memref<?xf64>
// CHECK-NEXT:      affine.store %[[V]], %arg1[%[[I]] floordiv 4] : memref<?xf64>
// CHECK-NEXT:      affine.store %[[V]], %arg1[%[[I]] floordiv 3 + %[[I]] mod 3] : memref<?xf64>
// CHECK-NEXT:    }
// CHECK-NEXT:    affine.for %[[K:.*]] = 0 to #[[TRIPS]]()[%[[N]]] {
// CHECK-NEXT:      affine.store %cst, %arg1[-%[[K]] + (symbol(%[[N]]) + 1) floordiv 2 - 1] : memref<?xf64>
// CHECK-NEXT:    }
func.func @subscripts(%n: i32, %a: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c1_i32 = arith.constant 1 : i32
  %c2_i32 = arith.constant 2 : i32
  %c3_i64 = arith.constant 3 : i64
  %cst = arith.constant 0.0 : f64
  %0 = arith.index_cast %n : i32 to index
  %dim = memref.dim %a, %c0 : memref<?xf64>
  scf.for %i = %c0 to %0 step %c1 {
    %ii = arith.index_cast %i : index to i32
    %t = arith.muli %ii, %c2_i32 : i32
    %t1 = arith.addi %t, %c1_i32 : i32
    %x = arith.index_cast %t1 : i32 to index
    %v = memref.load %a[%x] : memref<?xf64>
    %y = arith.addi %i, %0 : index
    memref.store %v, %a[%y] : memref<?xf64>
    %z0 = arith.addi %i, %dim : index
    %z = arith.subi %z0, %c1 : index
    memref.store %v, %a[%z] : memref<?xf64>
    %q = arith.floordivsi %i, %c4 : index
    memref.store %v, %a[%q] : memref<?xf64>
    %l = arith.extsi %ii : i32 to i64
    %d = arith.divsi %l, %c3_i64 : i64
    %r = arith.remsi %l, %c3_i64 : i64
    %s = arith.addi %d, %r : i64
    %s32 = arith.trunci %s : i64 to i32
    %w = arith.index_cast %s32 : i32 to index
    memref.store %v, %a[%w] : memref<?xf64>
  }
  %nm1 = arith.subi %0, %c1 : index
  %half = arith.floordivsi %nm1, %c2 : index
  %trips = arith.addi %half, %c1 : index
  scf.for %k = %c0 to %trips step %c1 {
    %k2 = arith.muli %k, %c2 : index
    %i = arith.subi %nm1, %k2 : index
    %ii = arith.index_cast %i : index to i32
    %h = arith.divsi %ii, %c2_i32 : i32
    %hx = arith.index_cast %h : i32 to index
    memref.store %cst, %a[%hx] : memref<?xf64>
  }
  return
}

// Loop-carried values (after mem2reg) stay iter_args; results are used after the loop.
// CHECK-LABEL: func.func @iter_args
// CHECK:         %[[R:.*]] = affine.for %[[I:.*]] = 0 to %{{.*}} iter_args(%[[ACC:.*]] = %cst) -> (f64) {
// CHECK-NEXT:      %[[V:.*]] = affine.load %arg1[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[V]] : f64
// CHECK-NEXT:      affine.yield %[[S]] : f64
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[R]] : f64
func.func @iter_args(%n: i32, %a: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.0 : f64
  %0 = arith.index_cast %n : i32 to index
  %r = scf.for %i = %c0 to %0 step %c1 iter_args(%acc = %cst) -> (f64) {
    %v = memref.load %a[%i] : memref<?xf64>
    %s = arith.addf %acc, %v : f64
    scf.yield %s : f64
  }
  return %r : f64
}

// Conditions: && is one set; || and != are chains with the then-part cloned; ! negates;
// == is an equality. Compares in i32 of index_cast counters.
// CHECK-LABEL: func.func @conditions
// CHECK:         affine.for %[[I:.*]] = 0 to %[[N:.*]] {
// CHECK-NEXT:      affine.if #{{.*}}(%[[I]])[%[[M:.*]]] {
// CHECK-NEXT:        affine.store %cst, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.if #{{.*}}(%[[I]]) {
// CHECK-NEXT:        affine.store %cst_0, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.if #{{.*}}(%[[I]])[%[[M]]] {
// CHECK-NEXT:          affine.store %cst_0, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.if #{{.*}}(%[[I]])[%[[M]]] {
// CHECK-NEXT:        affine.store %cst_1, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.if #{{.*}}(%[[I]])[%[[M]]] {
// CHECK-NEXT:          affine.store %cst_1, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.if #{{.*}}(%[[I]]) {
// CHECK-NEXT:        affine.store %cst, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.store %cst_0, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.if #{{.*}}(%[[I]]) {
// CHECK-NEXT:        affine.store %cst_1, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.if #{{.*}}(%[[I]]) {
// CHECK-NEXT:          affine.store %cst_1, %arg2[%[[I]]] : memref<?xf64>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
func.func @conditions(%n: i32, %m: i32, %a: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1_i32 = arith.constant 1 : i32
  %c2_i32 = arith.constant 2 : i32
  %c3_i32 = arith.constant 3 : i32
  %c5_i32 = arith.constant 5 : i32
  %c7_i32 = arith.constant 7 : i32
  %true = arith.constant true
  %cst = arith.constant 1.0 : f64
  %cst_0 = arith.constant 2.0 : f64
  %cst_1 = arith.constant 3.0 : f64
  %0 = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    %ii = arith.index_cast %i : index to i32
    %ge1 = arith.cmpi sge, %ii, %c1_i32 : i32
    %ltm = arith.cmpi slt, %ii, %m : i32
    %and = arith.andi %ge1, %ltm : i1
    scf.if %and {
      memref.store %cst, %a[%i] : memref<?xf64>
    }
    %lt5 = arith.cmpi slt, %ii, %c5_i32 : i32
    %gtm = arith.cmpi sgt, %ii, %m : i32
    %or = arith.ori %lt5, %gtm : i1
    scf.if %or {
      memref.store %cst_0, %a[%i] : memref<?xf64>
    }
    %ne = arith.cmpi ne, %ii, %m : i32
    scf.if %ne {
      memref.store %cst_1, %a[%i] : memref<?xf64>
    }
    %eq = arith.cmpi eq, %ii, %c3_i32 : i32
    scf.if %eq {
      memref.store %cst, %a[%i] : memref<?xf64>
    } else {
      memref.store %cst_0, %a[%i] : memref<?xf64>
    }
    %ge2 = arith.cmpi sge, %ii, %c2_i32 : i32
    %lt7 = arith.cmpi slt, %ii, %c7_i32 : i32
    %in = arith.andi %ge2, %lt7 : i1
    %not = arith.xori %in, %true : i1
    scf.if %not {
      memref.store %cst_1, %a[%i] : memref<?xf64>
    }
  }
  return
}

// An if with results whose branches write memory becomes an affine.if with results; a disjunction
// chains them, each else yielding the inner if's results.
// CHECK-LABEL: func.func @if_results
// CHECK:         affine.for %[[I:.*]] = 0 to %{{.*}} {
// CHECK-NEXT:      %[[R:.*]] = affine.if #{{.*}}(%[[I]]) -> f64 {
// CHECK-NEXT:        affine.store %cst, %arg1[%[[I]]] : memref<?xf64>
// CHECK-NEXT:        affine.yield %cst : f64
// CHECK-NEXT:      } else {
// CHECK-NEXT:        %[[R2:.*]] = affine.if #{{.*}}(%[[I]]) -> f64 {
// CHECK-NEXT:          affine.store %cst, %arg1[%[[I]]] : memref<?xf64>
// CHECK-NEXT:          affine.yield %cst : f64
// CHECK-NEXT:        } else {
// CHECK-NEXT:          %[[V:.*]] = affine.load %arg1[%[[I]] + 1] : memref<?xf64>
// CHECK-NEXT:          affine.yield %[[V]] : f64
// CHECK-NEXT:        }
// CHECK-NEXT:        affine.yield %[[R2]] : f64
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.store %[[R]], %arg1[%[[I]]] : memref<?xf64>
func.func @if_results(%n: i32, %a: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3_i32 = arith.constant 3 : i32
  %cst = arith.constant 1.0 : f64
  %0 = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    %ii = arith.index_cast %i : index to i32
    %ne = arith.cmpi ne, %ii, %c3_i32 : i32
    %r = scf.if %ne -> (f64) {
      memref.store %cst, %a[%i] : memref<?xf64>
      scf.yield %cst : f64
    } else {
      %i1 = arith.addi %i, %c1 : index
      %v = memref.load %a[%i1] : memref<?xf64>
      scf.yield %v : f64
    }
    memref.store %r, %a[%i] : memref<?xf64>
  }
  return
}

// Ternaries: pure branches become a select whatever the condition (here a float compare); a
// branch loading an address already read before the if is speculated too; a branch loading an
// address not accessed before is not (it may be out of bounds): with an affine condition it
// becomes an affine.if with a result, with a float condition it stays scf.if.
// CHECK-LABEL: func.func @ternaries
// CHECK:         affine.for %[[I:.*]] = 0 to %{{.*}} {
// CHECK-NEXT:      %[[V:.*]] = affine.load %arg1[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      %[[GT:.*]] = arith.cmpf ogt, %[[V]], %arg2 : f64
// CHECK-NEXT:      %[[SEL:.*]] = arith.select %[[GT]], %[[V]], %arg2 : f64
// CHECK-NEXT:      affine.store %[[SEL]], %arg1[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      %[[LT:.*]] = arith.cmpf olt, %[[V]], %arg2 : f64
// CHECK-NEXT:      %[[RE:.*]] = affine.load %arg1[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      %[[NEG:.*]] = arith.negf %[[RE]] : f64
// CHECK-NEXT:      %[[SEL2:.*]] = arith.select %[[LT]], %[[NEG]], %arg2 : f64
// CHECK-NEXT:      affine.store %[[SEL2]], %arg1[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      %[[R:.*]] = affine.if #{{.*}}(%[[I]]) -> f64 {
// CHECK-NEXT:        %[[NX:.*]] = affine.load %arg1[%[[I]] + 1] : memref<?xf64>
// CHECK-NEXT:        affine.yield %[[NX]] : f64
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.yield %arg2 : f64
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.store %[[R]], %arg1[%[[I]]] : memref<?xf64>
// CHECK-NEXT:      %[[R2:.*]] = scf.if %[[GT]] -> (f64) {
// CHECK-NEXT:        %[[NX2:.*]] = affine.load %arg1[%[[I]] + 1] : memref<?xf64>
// CHECK-NEXT:        scf.yield %[[NX2]] : f64
// CHECK-NEXT:      } else {
// CHECK-NEXT:        scf.yield %arg2 : f64
// CHECK-NEXT:      } {polyflow.not_affine = "condition is not affine: compares floating-point values"}
// NOSPEC-LABEL: func.func @ternaries
// NOSPEC:         arith.select
// NOSPEC:         scf.if %{{.*}} -> (f64) {
// NOSPEC-NEXT:      %{{.*}} = affine.load %arg1[%{{.*}}] : memref<?xf64>
// NOSPEC-NEXT:      %{{.*}} = arith.negf
// NOSPEC:         } {polyflow.not_affine = "condition is not affine: compares floating-point values"}
func.func @ternaries(%n: i32, %a: memref<?xf64>, %m: f64) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %0 = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    %v = memref.load %a[%i] : memref<?xf64>
    %gt = arith.cmpf ogt, %v, %m : f64
    %r = scf.if %gt -> (f64) {
      scf.yield %v : f64
    } else {
      scf.yield %m : f64
    }
    memref.store %r, %a[%i] : memref<?xf64>
    %lt = arith.cmpf olt, %v, %m : f64
    %r2 = scf.if %lt -> (f64) {
      %re = memref.load %a[%i] : memref<?xf64>
      %neg = arith.negf %re : f64
      scf.yield %neg : f64
    } else {
      scf.yield %m : f64
    }
    memref.store %r2, %a[%i] : memref<?xf64>
    %small = arith.cmpi slt, %i, %c5 : index
    %i1 = arith.addi %i, %c1 : index
    %r3 = scf.if %small -> (f64) {
      %nx = memref.load %a[%i1] : memref<?xf64>
      scf.yield %nx : f64
    } else {
      scf.yield %m : f64
    }
    memref.store %r3, %a[%i] : memref<?xf64>
    %r4 = scf.if %gt -> (f64) {
      %nx = memref.load %a[%i1] : memref<?xf64>
      scf.yield %nx : f64
    } else {
      scf.yield %m : f64
    }
    memref.store %r4, %a[%i] : memref<?xf64>
  }
  return
}

// NEGATIVE: an upper bound loaded from memory inside the nest; the inner loop stays scf.for and
// its own inner loop cannot use its counter.
// CHECK-LABEL: func.func @data_dependent_bound
// CHECK:         affine.for %[[I:.*]] = 0 to %{{.*}} {
// CHECK-NEXT:      %[[B:.*]] = affine.load %arg1[%[[I]]] : memref<?xi32>
// CHECK-NEXT:      %[[UB:.*]] = arith.index_cast %[[B]] : i32 to index
// CHECK-NEXT:      scf.for %[[J:.*]] = %{{.*}} to %[[UB]] step %{{.*}} {
// CHECK-NEXT:        scf.for %{{.*}} = %[[J]] to %{{.*}} step %{{.*}} {
// CHECK-NEXT:          memref.store %{{.*}}, %arg2[%[[I]], %[[J]]]
// CHECK-SAME:            {polyflow.not_affine = "subscript 1 uses the counter of an enclosing loop that was not raised"}
// CHECK-NEXT:        } {polyflow.not_affine = "lower bound uses the counter of an enclosing loop that was not raised"}
// CHECK-NEXT:      } {polyflow.not_affine = "upper bound is not affine: loaded from memory inside the loop nest"}
func.func @data_dependent_bound(%n: i32, %b: memref<?xi32>, %A: memref<40x40xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.0 : f64
  %0 = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    %bi = memref.load %b[%i] : memref<?xi32>
    %ub = arith.index_cast %bi : i32 to index
    scf.for %j = %c0 to %ub step %c1 {
      scf.for %k = %j to %0 step %c1 {
        memref.store %cst, %A[%i, %j] : memref<40x40xf64>
      }
    }
  }
  return
}

// NEGATIVE: subscripts a[b[i]] (indirection) and i * n (symbol times dim); a loop whose step is
// not a constant (its accesses cannot use its counter).
// CHECK-LABEL: func.func @bad_subscripts
// CHECK:         memref.load %arg1[%{{.*}}] {polyflow.not_affine = "subscript 0 is not affine: loaded from memory inside the loop nest"}
// CHECK:         memref.store %{{.*}}, %arg1[%{{.*}}] {polyflow.not_affine = "subscript 0 is not affine: product of a loop counter and a symbol"}
// CHECK:         } {polyflow.not_affine = "step is not a constant"}
func.func @bad_subscripts(%n: i32, %a: memref<?xf64>, %b: memref<?xi32>, %s: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %0 = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    %bi = memref.load %b[%i] : memref<?xi32>
    %x = arith.index_cast %bi : i32 to index
    %v = memref.load %a[%x] : memref<?xf64>
    %y = arith.muli %i, %0 : index
    memref.store %v, %a[%y] : memref<?xf64>
  }
  scf.for %i = %c0 to %0 step %s {
    %v = memref.load %a[%i] : memref<?xf64>
    memref.store %v, %a[%i] : memref<?xf64>
  }
  return
}

// NEGATIVE: unsigned compares, float compares and a while loop whose exit reads memory.
// CHECK-LABEL: func.func @not_affine_control
// CHECK:         scf.if %{{.*}} {
// CHECK:         } {polyflow.not_affine = "condition is not affine: unsigned comparison"}
// CHECK:         scf.if %{{.*}} {
// CHECK:         } {polyflow.not_affine = "condition is not affine: compares floating-point values"}
// CHECK:         scf.while
// CHECK:         } attributes {polyflow.not_affine = "while loop: data-dependent exit"}
// CHECK:         scf.while
// CHECK:         } attributes {polyflow.not_affine = "while loop: not a counted loop ({{.*}})"}
func.func @not_affine_control(%n: i32, %a: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c0_i32 = arith.constant 0 : i32
  %c1_i32 = arith.constant 1 : i32
  %c5_i32 = arith.constant 5 : i32
  %cst = arith.constant 0.0 : f64
  %0 = arith.index_cast %n : i32 to index
  scf.for %i = %c0 to %0 step %c1 {
    %ii = arith.index_cast %i : index to i32
    %u = arith.cmpi ult, %ii, %c5_i32 : i32
    scf.if %u {
      memref.store %cst, %a[%i] : memref<?xf64>
    }
    %v = memref.load %a[%i] : memref<?xf64>
    %f = arith.cmpf ogt, %v, %cst : f64
    scf.if %f {
      memref.store %cst, %a[%i] : memref<?xf64>
    }
  }
  %t = scf.while (%k = %c0) : (index) -> index {
    %v = memref.load %a[%k] : memref<?xf64>
    %pos = arith.cmpf ogt, %v, %cst : f64
    scf.condition(%pos) %k : index
  } do {
  ^bb0(%k: index):
    %k1 = arith.addi %k, %c1 : index
    scf.yield %k1 : index
  }
  %w = scf.while (%k = %c0_i32) : (i32) -> i32 {
    %lt = arith.cmpi slt, %k, %n : i32
    scf.condition(%lt) %k : i32
  } do {
  ^bb0(%k: i32):
    %k2 = arith.muli %k, %k : i32
    %k1 = arith.addi %k2, %c1_i32 : i32
    scf.yield %k1 : i32
  }
  return
}

// Odd inputs: a declaration, an i32 counter, constant conditions, accesses at the top level
// (a load there is a symbol), an if inside a while on its loop-carried value.
// CHECK-LABEL: func.func @odd
// CHECK:         %[[L:.*]] = affine.load %arg1[0] : memref<?xi32>
// CHECK-NEXT:    %[[LX:.*]] = arith.index_cast %[[L]] : i32 to index
// CHECK-NEXT:    affine.for %[[I:.*]] = 0 to %[[LX]] {
// CHECK-NEXT:      affine.if #{{.*}}() {
// CHECK-NEXT:        affine.store %{{.*}}, %arg1[%[[I]]] : memref<?xi32>
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.if #{{.*}}() {
// CHECK-NEXT:        affine.store %{{.*}}, %arg1[%[[I]]] : memref<?xi32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK:         scf.for %{{.*}} = %{{.*}} to %arg0 step %{{.*}} : i32 {
// CHECK:         } {polyflow.not_affine = "loop counter is not of index type"}
// CHECK:         scf.while
// CHECK:           scf.if
// CHECK:           } {polyflow.not_affine = "condition is not affine: value of a while loop"}
// CHECK:         } attributes {polyflow.not_affine = "while loop: not a counted loop ({{.*}})"}
func.func private @external(index)
func.func @odd(%n: i32, %a: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c0_i32 = arith.constant 0 : i32
  %c1_i32 = arith.constant 1 : i32
  %true = arith.constant true
  %false = arith.constant false
  %l = memref.load %a[%c0] : memref<?xi32>
  %lx = arith.index_cast %l : i32 to index
  scf.for %i = %c0 to %lx step %c1 {
    scf.if %true {
      memref.store %c0_i32, %a[%i] : memref<?xi32>
    }
    scf.if %false {
      memref.store %c1_i32, %a[%i] : memref<?xi32>
    }
  }
  scf.for %k = %c0_i32 to %n step %c1_i32 : i32 {
    func.call @external(%c0) : (index) -> ()
  }
  %w = scf.while (%k = %c0) : (index) -> index {
    %lt = arith.cmpi slt, %k, %lx : index
    scf.condition(%lt) %k : index
  } do {
  ^bb0(%k: index):
    %small = arith.cmpi slt, %k, %c1 : index
    scf.if %small {
      memref.store %c0_i32, %a[%c1] : memref<?xi32>
    }
    %k2 = arith.muli %k, %k : index
    %k1 = arith.addi %k2, %c1 : index
    scf.yield %k1 : index
  }
  return
}

// The pass is idempotent: a second run changes nothing, reasons included.
// TWICE-LABEL: func.func @rectangular
// TWICE:         affine.for
// TWICE-LABEL: func.func @data_dependent_bound
// TWICE:         } {polyflow.not_affine = "lower bound uses the counter of an enclosing loop that was not raised"}
// TWICE-NEXT:    } {polyflow.not_affine = "upper bound is not affine: loaded from memory inside the loop nest"}

// A raised loop keeps the dialect attributes of the scf.for (here a reduction mark).
// CHECK-LABEL: func.func @keeps_discardable_attributes
// CHECK: affine.for
// CHECK: } {polyflow.reductions = ["add"]}
func.func @keeps_discardable_attributes(%n: index, %A: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %z) -> (f64) {
    %v = memref.load %A[%i] : memref<?xf64>
    %t = arith.addf %s, %v : f64
    scf.yield %t : f64
  } {polyflow.reductions = ["add"]}
  memref.store %r, %A[%c0] : memref<?xf64>
  return
}
