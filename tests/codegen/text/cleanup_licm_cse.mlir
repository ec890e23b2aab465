// RUN: --passes cleanup
// LICM moves the loop-invariant multiply out of the loop, CSE merges the equal constants and
// multiplies, DCE drops the unused add; the loop-carried add stays.
func.func @k(%n: index, %x: index) attributes {num_subgroups = 1} {
  %0 = arith.constant 0 : index
  %1 = arith.constant 1 : index
  %s, %t = scf.for %i = %0 to %n step %1 iter_args(%a = %0, %b = %0) -> (index, index) {
    %2 = arith.constant 3 : index
    %3 = arith.constant 3 : index
    %inv = arith.muli %x, %2 : index
    %inv2 = arith.muli %x, %3 : index
    %dead = arith.addi %inv, %i : index
    %a2 = arith.addi %a, %inv : index
    %b2 = arith.addi %b, %inv2 : index
    scf.yield %a2, %b2 : index, index
  }
  func.return
}

// CHECK-LABEL: func.func @k
// CHECK: %[[C3:[0-9]+]] = arith.constant 3 : index
// CHECK-NOT: arith.constant 3
// CHECK: %inv = arith.muli %x, %[[C3]] : index
// CHECK-NOT: arith.muli
// CHECK: scf.for %i = {{.*}} iter_args(%a = %{{[0-9]+}}, %b = %{{[0-9]+}})
// CHECK-NOT: arith.muli
// CHECK-NOT: %dead
// CHECK: %a2 = arith.addi %a, %inv : index
// CHECK-NEXT: %b2 = arith.addi %b, %inv : index
// CHECK-NEXT: scf.yield %a2, %b2
