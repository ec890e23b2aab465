// RUN: --passes pipelining --target bmg --num-stages 2
// Cooperative prefetch (XeTile RFC appendix 2.1): A 32x16 f32 over 4 subgroups is prefetched in
// 8x16 blocks (sg_layout [4, 1]), B 16x32 in [2, 2] x [8, 16]; num_stages = 2 prefetches twice before
// the loop, and the loop carries the prefetch tiles, prefetching and advancing each once per step.
// (bmg: on pvc the two tiles are split over subgroup ranges, 16-row blocks: split_prefetch.)
func.func @matmul(%a: memref<?x?xf32>, %b: memref<?x?xf32>, %c: memref<?x?xf32>, %M: index, %N: index, %K: index) attributes {num_subgroups = 4, num_stages = 3, grf_mode = "default", level = "workgroup"} {
  %0 = xejit.program_id {axis = 0} : index
  %1 = arith.constant 32 : index
  %m = arith.muli %0, %1 : index
  %2 = xejit.program_id {axis = 1} : index
  %3 = arith.constant 32 : index
  %n = arith.muli %2, %3 : index
  %4 = arith.constant 0 : index
  %ta = xetile.init_tile %a, %m, %4 : memref<?x?xf32>, index, index -> !xetile.tile<32x16xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>
  %5 = arith.constant 0 : index
  %tb = xetile.init_tile %b, %5, %n : memref<?x?xf32>, index, index -> !xetile.tile<16x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>
  %acc = arith.constant 0.0 {layout = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>} : vector<32x32xf32>
  %6 = arith.constant 0 : index
  %7 = arith.constant 16 : index
  %acc_1, %ta_1, %tb_1 = scf.for %k = %6 to %K step %7 iter_args(%acc_2 = %acc, %ta_2 = %ta, %tb_2 = %tb) -> (vector<32x32xf32>, !xetile.tile<32x16xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>, !xetile.tile<16x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>) {
    %8 = xetile.load_tile %ta_2 {layout = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>} : !xetile.tile<32x16xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>> -> vector<32x16xf32>
    %9 = xetile.load_tile %tb_2 {layout = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>} : !xetile.tile<16x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>> -> vector<16x32xf32>
    %acc_3 = xetile.tile_mma %8, %9, %acc_2 {layout = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>} : vector<32x16xf32>, vector<16x32xf32>, vector<32x32xf32> -> vector<32x32xf32>
    %10 = arith.constant 0 : index
    %11 = arith.constant 16 : index
    %ta_3 = xetile.update_tile_offset %ta_2, %10, %11 : !xetile.tile<32x16xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>, index, index -> !xetile.tile<32x16xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>
    %12 = arith.constant 16 : index
    %13 = arith.constant 0 : index
    %tb_3 = xetile.update_tile_offset %tb_2, %12, %13 : !xetile.tile<16x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>, index, index -> !xetile.tile<16x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>
    scf.yield %acc_3, %ta_3, %tb_3 : vector<32x32xf32>, !xetile.tile<32x16xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>, !xetile.tile<16x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>
  }
  %14 = xetile.init_tile %c, %m, %n : memref<?x?xf32>, index, index -> !xetile.tile<32x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>
  xetile.store_tile %acc_1, %14 : vector<32x32xf32>, !xetile.tile<32x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [16, 16]>>>
  func.return
}

// CHECK-LABEL: func.func @matmul
// CHECK: %pf = xetile.init_tile %a, {{.*}} -> !xetile.tile<32x16xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [4, 1], sg_data = [8, 16]>>>
// CHECK: xetile.prefetch_tile %pf :
// CHECK-NEXT: %[[A1:[0-9]+]] = xetile.update_tile_offset %pf,
// CHECK-NEXT: xetile.prefetch_tile %[[A1]]
// CHECK-NEXT: %[[A2:[0-9]+]] = xetile.update_tile_offset %[[A1]],
// CHECK-NOT: xetile.prefetch_tile %[[A2]]
// CHECK: %pf_1 = xetile.init_tile %b, {{.*}} -> !xetile.tile<16x32xf32, #xetile.tile_attr<wg = #xetile.wg_map<sg_layout = [2, 2], sg_data = [8, 16]>>>
// CHECK: scf.for %k = {{.*}} iter_args({{.*}}, %[[PA:[a-z0-9_]+]] = %[[A2]], %[[PB:[a-z0-9_]+]] = %{{[0-9]+}})
// CHECK: xetile.prefetch_tile %[[PA]]
// CHECK: xetile.update_tile_offset %[[PA]]
// CHECK: xetile.prefetch_tile %[[PB]]
// CHECK: xetile.update_tile_offset %[[PB]]
// CHECK: scf.yield
