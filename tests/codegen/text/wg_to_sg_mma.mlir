// RUN: --passes layout,wg-to-sg,cleanup
// wg_to_sg: subgroup s of a [2, 2] layout takes rows (s / 2) * 32 and columns (s % 2) * 32;
// A keeps all of K, B all of K, C both offsets; every value has the subgroup shape.
func.func @mma(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %c: memref<?x?xf32>) attributes {num_subgroups = 4} {
  %0 = arith.constant 0 : index
  %ta = xetile.init_tile %a, %0, %0 : memref<?x?xf16>, index, index -> !xetile.tile<64x32xf16>
  %tb = xetile.init_tile %b, %0, %0 : memref<?x?xf16>, index, index -> !xetile.tile<32x64xf16>
  %tc = xetile.init_tile %c, %0, %0 : memref<?x?xf32>, index, index -> !xetile.tile<64x64xf32>
  %va = xetile.load_tile %ta : !xetile.tile<64x32xf16> -> vector<64x32xf16>
  %vb = xetile.load_tile %tb : !xetile.tile<32x64xf16> -> vector<32x64xf16>
  %acc = arith.constant 0.0 : vector<64x64xf32>
  %d = xetile.tile_mma %va, %vb, %acc : vector<64x32xf16>, vector<32x64xf16>, vector<64x64xf32> -> vector<64x64xf32>
  xetile.store_tile %d, %tc : vector<64x64xf32>, !xetile.tile<64x64xf32>
  func.return
}


// CHECK-LABEL: func.func @mma
// CHECK-SAME: level = "subgroup"
// CHECK: %sgid = gpu.subgroup_id : index
// CHECK-DAG: %[[C32:[0-9]+]] = arith.constant 32 : index
// CHECK-DAG: %[[C2:[0-9]+]] = arith.constant 2 : index
// CHECK: %[[COL:[0-9]+]] = arith.remsi %sgid, %[[C2]] : index
// CHECK: %[[ROW:[0-9]+]] = arith.divsi %sgid, %[[C2]] : index
// CHECK: %[[R:[0-9]+]] = arith.muli %[[ROW]], %[[C32]] : index
// CHECK: %[[M:[0-9]+]] = arith.addi %{{[0-9]+}}, %[[R]] : index
// CHECK: %ta = xetile.init_tile %a, %[[M]], %{{[0-9]+}} {wg_tile = [64, 32, 2, 2, 32, 32, 1]} : {{.*}} -> !xetile.tile<32x32xf16>
// CHECK: %[[C:[0-9]+]] = arith.muli %[[COL]], %[[C32]] : index
// CHECK: %[[N:[0-9]+]] = arith.addi %{{[0-9]+}}, %[[C]] : index
// CHECK: %tb = xetile.init_tile %b, %{{[0-9]+}}, %[[N]] {wg_tile = [32, 64, 2, 2, 32, 32, 1]} : {{.*}} -> !xetile.tile<32x32xf16>
// CHECK: %tc = xetile.init_tile %c, %[[M]], %[[N]] {wg_tile = [64, 64, 2, 2, 32, 32, 1]} : {{.*}} -> !xetile.tile<32x32xf32>
// CHECK: xetile.tile_mma {{.*}} : vector<32x32xf16>, vector<32x32xf16>, vector<32x32xf32> -> vector<32x32xf32>
// CHECK-NOT: wg_map
