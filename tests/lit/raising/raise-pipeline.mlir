// What the raising pipeline hands to lowering lowers: affine.for with min/max bounds and
// iter_args, affine.if with results, affine.min, affine.load/store, and the report's attributes
// (polyflow.reductions, polyflow.not_affine), which lowering drops without complaint.
// RUN: polyflow-opt --pass 'lower-affine' %s | filecheck %s
// RUN: polyflow-opt --pass 'lower-affine,convert-scf-to-cf' %s | filecheck %s --check-prefix=CF

#lb = affine_map<(d0)[s0] -> (0, d0 - s0)>
#ub = affine_map<(d0)[s0] -> (d0 + 3, s0)>

// CHECK-LABEL: func.func @k
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: %[[LB:.*]] = arith.maxsi
// CHECK: %[[UB:.*]] = arith.minsi
// CHECK: %[[S:.*]] = scf.for %{{.*}} = %[[LB]] to %[[UB]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (i64) {
// CHECK: arith.minsi
// CHECK: %[[V:.*]] = scf.if %{{.*}} -> (i64) {
// CHECK-NEXT: scf.yield %[[S]] : i64
// CHECK-NEXT: } else {
// CHECK: memref.store %[[V]], %{{.*}}[%[[I]]] : memref<16xi64>
// CHECK-NOT: affine.
// CHECK-NOT: polyflow.
// CF-LABEL: func.func @k
// CF-NOT: scf.
// CF-NOT: polyflow.
func.func @k(%n: index, %out: memref<16xi64>) {
  %z = arith.constant 0 : i64
  affine.for %i = 0 to 16 {
    %s = affine.for %j = max #lb(%i)[%n] to min #ub(%i)[%n] iter_args(%acc = %z) -> (i64) {
      %jj = arith.index_cast %j : index to i64
      %t = arith.addi %acc, %jj : i64
      affine.yield %t : i64
    } {polyflow.reductions = ["add"]}
    %m = affine.min affine_map<(d0)[s0] -> (d0 floordiv 2, s0 - d0)>(%i)[%n]
    %mm = arith.index_cast %m : index to i64
    %v = affine.if affine_set<(d0)[s0] : (d0 mod 3 == 0, s0 - d0 - 1 >= 0)>(%i)[%n] -> i64 {
      affine.yield %s : i64
    } else {
      %neg = arith.subi %mm, %s : i64
      affine.yield %neg : i64
    }
    affine.store %v, %out[%i] : memref<16xi64>
  } {polyflow.not_affine = "kept by no pass: lowering must not mind it"}
  return
}
