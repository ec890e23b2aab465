// RUN: --passes blocking --target pvc
// pvc blocking of a 32x32 f16 GEMM subgroup tile with BK = 16: A as one 32x16 2D block load cut
// into four 8x16 DPAS A operands; B as one VNNI-packed load of two 16x16 blocks (array_length 2);
// 4 x 2 DPAS of 8x16x16 into eight 8x16 f32 accumulators carried by the loop.
func.func @matmul(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %c: memref<?x?xf32>, %M: index, %N: index, %K: index) attributes {num_subgroups = 1, num_stages = 3, grf_mode = "default", level = "subgroup"} {
  %0 = xejit.program_id {axis = 0} : index
  %1 = arith.constant 32 : index
  %m = arith.muli %0, %1 : index
  %2 = xejit.program_id {axis = 1} : index
  %3 = arith.constant 32 : index
  %n = arith.muli %2, %3 : index
  %4 = arith.constant 0 : index
  %ta = xetile.init_tile %a, %m, %4 : memref<?x?xf16>, index, index -> !xetile.tile<32x16xf16>
  %5 = arith.constant 0 : index
  %tb = xetile.init_tile %b, %5, %n : memref<?x?xf16>, index, index -> !xetile.tile<16x32xf16>
  %acc = arith.constant 0.0 : vector<32x32xf32>
  %6 = arith.constant 0 : index
  %7 = arith.constant 16 : index
  %acc_1, %ta_1, %tb_1 = scf.for %k = %6 to %K step %7 iter_args(%acc_2 = %acc, %ta_2 = %ta, %tb_2 = %tb) -> (vector<32x32xf32>, !xetile.tile<32x16xf16>, !xetile.tile<16x32xf16>) {
    %8 = xetile.load_tile %ta_2 : !xetile.tile<32x16xf16> -> vector<32x16xf16>
    %9 = xetile.load_tile %tb_2 : !xetile.tile<16x32xf16> -> vector<16x32xf16>
    %acc_3 = xetile.tile_mma %8, %9, %acc_2 : vector<32x16xf16>, vector<16x32xf16>, vector<32x32xf32> -> vector<32x32xf32>
    %10 = arith.constant 0 : index
    %11 = arith.constant 16 : index
    %ta_3 = xetile.update_tile_offset %ta_2, %10, %11 : !xetile.tile<32x16xf16>, index, index -> !xetile.tile<32x16xf16>
    %12 = arith.constant 16 : index
    %13 = arith.constant 0 : index
    %tb_3 = xetile.update_tile_offset %tb_2, %12, %13 : !xetile.tile<16x32xf16>, index, index -> !xetile.tile<16x32xf16>
    scf.yield %acc_3, %ta_3, %tb_3 : vector<32x32xf32>, !xetile.tile<32x16xf16>, !xetile.tile<16x32xf16>
  }
  %14 = xetile.init_tile %c, %m, %n : memref<?x?xf32>, index, index -> !xetile.tile<32x32xf32>
  xetile.store_tile %acc_1, %14 : vector<32x32xf32>, !xetile.tile<32x32xf32>
  func.return
}

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: level = "xegpu"
// CHECK: %[[A:[0-9]+]] = xegpu.create_nd_tdesc %a, %m, %{{[0-9]+}} : {{.*}} -> !xegpu.tensor_desc<32x16xf16>
// CHECK: %[[B:[0-9]+]] = xegpu.create_nd_tdesc %b, %{{[0-9]+}}, %n : {{.*}} -> !xegpu.tensor_desc<16x16xf16, #xegpu.block_tdesc_attr<array_length = 2>>
// CHECK: scf.for %k = {{.*}} -> (vector<8x16xf32>, vector<8x16xf32>, vector<8x16xf32>, vector<8x16xf32>, vector<8x16xf32>, vector<8x16xf32>, vector<8x16xf32>, vector<8x16xf32>, !xegpu.tensor_desc<32x16xf16>, !xegpu.tensor_desc<16x16xf16, #xegpu.block_tdesc_attr<array_length = 2>>) {
// CHECK-NEXT: %[[VA:[0-9]+]] = xegpu.load_nd %{{[0-9]+}} : !xegpu.tensor_desc<32x16xf16> -> vector<32x16xf16>
// CHECK-COUNT-4: vector.extract_strided_slice %[[VA]]
// CHECK-NEXT: %[[B0:[0-9]+]], %[[B1:[0-9]+]] = xegpu.load_nd %{{[0-9]+}} {packed = true} : {{.*}} -> vector<8x16x2xf16>, vector<8x16x2xf16>
// CHECK-COUNT-8: xegpu.dpas {{.*}} : vector<8x16xf16>, vector<8x16x2xf16>, vector<8x16xf32> -> vector<8x16xf32>
// CHECK: xegpu.update_nd_offset
// CHECK: xegpu.update_nd_offset
// CHECK: scf.yield
// CHECK-COUNT-8: xegpu.store_nd {{.*}} : vector<8x16xf32>, !xegpu.tensor_desc<8x16xf32>
// CHECK-NOT: xegpu.dpas
