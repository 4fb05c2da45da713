// polyflow-opt runs upstream passes on each func.func, and lists its own passes.
// RUN: polyflow-opt --pass 'canonicalize' %s | filecheck %s
// RUN: polyflow-opt --list-passes | filecheck %s --check-prefix=LIST
// RUN: not polyflow-opt --pass 'raise-mem2reg{nonsense=1}' %s 2>&1 | filecheck %s --check-prefix=BADOPT

// CHECK-LABEL: func.func @f
// CHECK-NEXT: return %arg0
func.func @f(%a: index) -> index {
  %c0 = arith.constant 0 : index
  %0 = arith.addi %a, %c0 : index
  return %0 : index
}

// LIST: raise-mem2reg
// LIST: raise-scf-to-affine
// BADOPT: polyflow-opt: error: pass 'raise-mem2reg' has no option 'nonsense'
