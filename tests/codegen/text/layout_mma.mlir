// RUN: --passes layout
// A tile_mma without user layouts gets sg_layout [a, b] with a*b = num_subgroups, as square as the
// shape allows; A is split by rows and B by columns, both sharing K.
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
// CHECK-SAME: level = "workgroup"
// CHECK: %ta = xetile.init_tile {{.*}} -> !xetile.tile<64x32xf16, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [32, 32]>>>
// CHECK: %tb = xetile.init_tile {{.*}} -> !xetile.tile<32x64xf16, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [32, 32]>>>
// CHECK: %acc = arith.constant 0.0 {layout = #xetile.wg_map<sg_layout = [2, 2], sg_data = [32, 32]>}
// CHECK: %d = xetile.tile_mma %va, %vb, %acc {layout = #xetile.wg_map<sg_layout = [2, 2], sg_data = [32, 32]>}
