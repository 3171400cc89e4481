// IRON design: GEMM(M=256, K=512, N=512, b_transposed=True, precision=<Precision.HIGH: 'high'>, effective_precision=<Precision.HIGH: 'high'>, num_aie_columns=2, tile_m=64, tile_k=64, tile_n=32, out_depth=2) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    func.func private @gemm_f32_zero(memref<64x32xf32>, i32, i32) attributes {link_with = "gemm.o"}
    func.func private @gemm_bf16_acc_round_bt(memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) attributes {link_with = "gemm.o"}
    func.func private @gemm_bf16_store(memref<64x32xf32>, memref<64x32xbf16>, i32, i32) attributes {link_with = "gemm.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %mem_tile_0_1 = aie.tile(0, 1)
    %mem_tile_1_1 = aie.tile(1, 1)
    %tile_0_2 = aie.tile(0, 2)
    %tile_0_3 = aie.tile(0, 3)
    %tile_0_4 = aie.tile(0, 4)
    %tile_0_5 = aie.tile(0, 5)
    %tile_1_2 = aie.tile(1, 2)
    %tile_1_3 = aie.tile(1, 3)
    %tile_1_4 = aie.tile(1, 4)
    %tile_1_5 = aie.tile(1, 5)
    aie.objectfifo @a_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @a_row0(%mem_tile_0_1 dimensionsToStream [<size = 16, stride = 256>, <size = 8, stride = 8>, <size = 4, stride = 64>, <size = 8, stride = 1>], {%tile_0_2, %tile_1_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @a_row1(%mem_tile_0_1 dimensionsToStream [<size = 16, stride = 256>, <size = 8, stride = 8>, <size = 4, stride = 64>, <size = 8, stride = 1>], {%tile_0_3, %tile_1_3}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo.link [@a_0] -> [@a_row0, @a_row1] ([] [0, 4096])
    aie.objectfifo @a_1(%shim_noc_tile_1_0, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo @a_row2(%mem_tile_1_1 dimensionsToStream [<size = 16, stride = 256>, <size = 8, stride = 8>, <size = 4, stride = 64>, <size = 8, stride = 1>], {%tile_0_4, %tile_1_4}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @a_row3(%mem_tile_1_1 dimensionsToStream [<size = 16, stride = 256>, <size = 8, stride = 8>, <size = 4, stride = 64>, <size = 8, stride = 1>], {%tile_0_5, %tile_1_5}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo.link [@a_1] -> [@a_row2, @a_row3] ([] [0, 4096])
    aie.objectfifo @b_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
    aie.objectfifo @b_col0(%mem_tile_0_1 dimensionsToStream [<size = 8, stride = 256>, <size = 8, stride = 8>, <size = 4, stride = 64>, <size = 8, stride = 1>], {%tile_0_2, %tile_0_3, %tile_0_4, %tile_0_5}, 2 : i32) : !aie.objectfifo<memref<32x64xbf16>>
    aie.objectfifo.link [@b_0] -> [@b_col0] ([] [])
    aie.objectfifo @c_0_0(%tile_0_2, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<64x32xbf16>>
    aie.objectfifo @c_0_1(%tile_0_3, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<64x32xbf16>>
    aie.objectfifo @c_0_2(%tile_0_4, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<64x32xbf16>>
    aie.objectfifo @c_0_3(%tile_0_5, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<64x32xbf16>>
    aie.objectfifo @out_0(%mem_tile_0_1 dimensionsToStream [<size = 64, stride = 128>, <size = 4, stride = 4>, <size = 8, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@c_0_0, @c_0_1, @c_0_2, @c_0_3] -> [@out_0] ([0, 2048, 4096, 6144] [])
    aie.objectfifo @b_1(%shim_noc_tile_1_0, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
    aie.objectfifo @b_col1(%mem_tile_1_1 dimensionsToStream [<size = 8, stride = 256>, <size = 8, stride = 8>, <size = 4, stride = 64>, <size = 8, stride = 1>], {%tile_1_2, %tile_1_3, %tile_1_4, %tile_1_5}, 2 : i32) : !aie.objectfifo<memref<32x64xbf16>>
    aie.objectfifo.link [@b_1] -> [@b_col1] ([] [])
    aie.objectfifo @c_1_0(%tile_1_2, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<64x32xbf16>>
    aie.objectfifo @c_1_1(%tile_1_3, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<64x32xbf16>>
    aie.objectfifo @c_1_2(%tile_1_4, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<64x32xbf16>>
    aie.objectfifo @c_1_3(%tile_1_5, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<64x32xbf16>>
    aie.objectfifo @out_1(%mem_tile_1_1 dimensionsToStream [<size = 64, stride = 128>, <size = 4, stride = 4>, <size = 8, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@c_1_0, @c_1_1, @c_1_2, @c_1_3] -> [@out_1] ([0, 2048, 4096, 6144] [])
    %acc_0_0 = aie.buffer(%tile_0_2) {sym_name = "acc_0_0"} : memref<64x32xf32>
    %acc_0_1 = aie.buffer(%tile_0_3) {sym_name = "acc_0_1"} : memref<64x32xf32>
    %acc_0_2 = aie.buffer(%tile_0_4) {sym_name = "acc_0_2"} : memref<64x32xf32>
    %acc_0_3 = aie.buffer(%tile_0_5) {sym_name = "acc_0_3"} : memref<64x32xf32>
    %acc_1_0 = aie.buffer(%tile_1_2) {sym_name = "acc_1_0"} : memref<64x32xf32>
    %acc_1_1 = aie.buffer(%tile_1_3) {sym_name = "acc_1_1"} : memref<64x32xf32>
    %acc_1_2 = aie.buffer(%tile_1_4) {sym_name = "acc_1_2"} : memref<64x32xf32>
    %acc_1_3 = aie.buffer(%tile_1_5) {sym_name = "acc_1_3"} : memref<64x32xf32>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c8 = arith.constant 8 : index
      %c64_i32 = arith.constant 64 : i32
      %c32_i32 = arith.constant 32 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %t = %c0 to %c8 step %c1 {
          func.call @gemm_f32_zero(%acc_0_0, %c64_i32, %c32_i32) : (memref<64x32xf32>, i32, i32) -> ()
          scf.for %k = %c0 to %c8 step %c1 {
            %a_view = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
            %a = aie.objectfifo.subview.access %a_view[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
            %b_view = aie.objectfifo.acquire @b_col0(Consume, 1) : !aie.objectfifosubview<memref<32x64xbf16>>
            %b = aie.objectfifo.subview.access %b_view[0] : !aie.objectfifosubview<memref<32x64xbf16>> -> memref<32x64xbf16>
            func.call @gemm_bf16_acc_round_bt(%a, %b, %acc_0_0, %c64_i32, %c64_i32, %c32_i32) : (memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @b_col0(Consume, 1)
          }
          %c_view = aie.objectfifo.acquire @c_0_0(Produce, 1) : !aie.objectfifosubview<memref<64x32xbf16>>
          %c = aie.objectfifo.subview.access %c_view[0] : !aie.objectfifosubview<memref<64x32xbf16>> -> memref<64x32xbf16>
          func.call @gemm_bf16_store(%acc_0_0, %c, %c64_i32, %c32_i32) : (memref<64x32xf32>, memref<64x32xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_0_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_0_3 = aie.core(%tile_0_3) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c8_1 = arith.constant 8 : index
      %c64_i32_1 = arith.constant 64 : i32
      %c32_i32_1 = arith.constant 32 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %t_1 = %c0_1 to %c8_1 step %c1_1 {
          func.call @gemm_f32_zero(%acc_0_1, %c64_i32_1, %c32_i32_1) : (memref<64x32xf32>, i32, i32) -> ()
          scf.for %k_1 = %c0_1 to %c8_1 step %c1_1 {
            %a_view_1 = aie.objectfifo.acquire @a_row1(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
            %a_1 = aie.objectfifo.subview.access %a_view_1[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
            %b_view_1 = aie.objectfifo.acquire @b_col0(Consume, 1) : !aie.objectfifosubview<memref<32x64xbf16>>
            %b_1 = aie.objectfifo.subview.access %b_view_1[0] : !aie.objectfifosubview<memref<32x64xbf16>> -> memref<32x64xbf16>
            func.call @gemm_bf16_acc_round_bt(%a_1, %b_1, %acc_0_1, %c64_i32_1, %c64_i32_1, %c32_i32_1) : (memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row1(Consume, 1)
            aie.objectfifo.release @b_col0(Consume, 1)
          }
          %c_view_1 = aie.objectfifo.acquire @c_0_1(Produce, 1) : !aie.objectfifosubview<memref<64x32xbf16>>
          %c_1 = aie.objectfifo.subview.access %c_view_1[0] : !aie.objectfifosubview<memref<64x32xbf16>> -> memref<64x32xbf16>
          func.call @gemm_bf16_store(%acc_0_1, %c_1, %c64_i32_1, %c32_i32_1) : (memref<64x32xf32>, memref<64x32xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_0_1(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_0_4 = aie.core(%tile_0_4) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c8_2 = arith.constant 8 : index
      %c64_i32_2 = arith.constant 64 : i32
      %c32_i32_2 = arith.constant 32 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %t_2 = %c0_2 to %c8_2 step %c1_2 {
          func.call @gemm_f32_zero(%acc_0_2, %c64_i32_2, %c32_i32_2) : (memref<64x32xf32>, i32, i32) -> ()
          scf.for %k_2 = %c0_2 to %c8_2 step %c1_2 {
            %a_view_2 = aie.objectfifo.acquire @a_row2(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
            %a_2 = aie.objectfifo.subview.access %a_view_2[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
            %b_view_2 = aie.objectfifo.acquire @b_col0(Consume, 1) : !aie.objectfifosubview<memref<32x64xbf16>>
            %b_2 = aie.objectfifo.subview.access %b_view_2[0] : !aie.objectfifosubview<memref<32x64xbf16>> -> memref<32x64xbf16>
            func.call @gemm_bf16_acc_round_bt(%a_2, %b_2, %acc_0_2, %c64_i32_2, %c64_i32_2, %c32_i32_2) : (memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row2(Consume, 1)
            aie.objectfifo.release @b_col0(Consume, 1)
          }
          %c_view_2 = aie.objectfifo.acquire @c_0_2(Produce, 1) : !aie.objectfifosubview<memref<64x32xbf16>>
          %c_2 = aie.objectfifo.subview.access %c_view_2[0] : !aie.objectfifosubview<memref<64x32xbf16>> -> memref<64x32xbf16>
          func.call @gemm_bf16_store(%acc_0_2, %c_2, %c64_i32_2, %c32_i32_2) : (memref<64x32xf32>, memref<64x32xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_0_2(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_0_5 = aie.core(%tile_0_5) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c8_3 = arith.constant 8 : index
      %c64_i32_3 = arith.constant 64 : i32
      %c32_i32_3 = arith.constant 32 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %t_3 = %c0_3 to %c8_3 step %c1_3 {
          func.call @gemm_f32_zero(%acc_0_3, %c64_i32_3, %c32_i32_3) : (memref<64x32xf32>, i32, i32) -> ()
          scf.for %k_3 = %c0_3 to %c8_3 step %c1_3 {
            %a_view_3 = aie.objectfifo.acquire @a_row3(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
            %a_3 = aie.objectfifo.subview.access %a_view_3[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
            %b_view_3 = aie.objectfifo.acquire @b_col0(Consume, 1) : !aie.objectfifosubview<memref<32x64xbf16>>
            %b_3 = aie.objectfifo.subview.access %b_view_3[0] : !aie.objectfifosubview<memref<32x64xbf16>> -> memref<32x64xbf16>
            func.call @gemm_bf16_acc_round_bt(%a_3, %b_3, %acc_0_3, %c64_i32_3, %c64_i32_3, %c32_i32_3) : (memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row3(Consume, 1)
            aie.objectfifo.release @b_col0(Consume, 1)
          }
          %c_view_3 = aie.objectfifo.acquire @c_0_3(Produce, 1) : !aie.objectfifosubview<memref<64x32xbf16>>
          %c_3 = aie.objectfifo.subview.access %c_view_3[0] : !aie.objectfifosubview<memref<64x32xbf16>> -> memref<64x32xbf16>
          func.call @gemm_bf16_store(%acc_0_3, %c_3, %c64_i32_3, %c32_i32_3) : (memref<64x32xf32>, memref<64x32xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_0_3(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_4 = arith.constant 0 : index
      %c1_4 = arith.constant 1 : index
      %c9223372036854775807_4 = arith.constant 9223372036854775807 : index
      %c8_4 = arith.constant 8 : index
      %c64_i32_4 = arith.constant 64 : i32
      %c32_i32_4 = arith.constant 32 : i32
      scf.for %run_4 = %c0_4 to %c9223372036854775807_4 step %c1_4 {
        scf.for %t_4 = %c0_4 to %c8_4 step %c1_4 {
          func.call @gemm_f32_zero(%acc_1_0, %c64_i32_4, %c32_i32_4) : (memref<64x32xf32>, i32, i32) -> ()
          scf.for %k_4 = %c0_4 to %c8_4 step %c1_4 {
            %a_view_4 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
            %a_4 = aie.objectfifo.subview.access %a_view_4[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
            %b_view_4 = aie.objectfifo.acquire @b_col1(Consume, 1) : !aie.objectfifosubview<memref<32x64xbf16>>
            %b_4 = aie.objectfifo.subview.access %b_view_4[0] : !aie.objectfifosubview<memref<32x64xbf16>> -> memref<32x64xbf16>
            func.call @gemm_bf16_acc_round_bt(%a_4, %b_4, %acc_1_0, %c64_i32_4, %c64_i32_4, %c32_i32_4) : (memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @b_col1(Consume, 1)
          }
          %c_view_4 = aie.objectfifo.acquire @c_1_0(Produce, 1) : !aie.objectfifosubview<memref<64x32xbf16>>
          %c_4 = aie.objectfifo.subview.access %c_view_4[0] : !aie.objectfifosubview<memref<64x32xbf16>> -> memref<64x32xbf16>
          func.call @gemm_bf16_store(%acc_1_0, %c_4, %c64_i32_4, %c32_i32_4) : (memref<64x32xf32>, memref<64x32xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_1_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_3 = aie.core(%tile_1_3) {
      %c0_5 = arith.constant 0 : index
      %c1_5 = arith.constant 1 : index
      %c9223372036854775807_5 = arith.constant 9223372036854775807 : index
      %c8_5 = arith.constant 8 : index
      %c64_i32_5 = arith.constant 64 : i32
      %c32_i32_5 = arith.constant 32 : i32
      scf.for %run_5 = %c0_5 to %c9223372036854775807_5 step %c1_5 {
        scf.for %t_5 = %c0_5 to %c8_5 step %c1_5 {
          func.call @gemm_f32_zero(%acc_1_1, %c64_i32_5, %c32_i32_5) : (memref<64x32xf32>, i32, i32) -> ()
          scf.for %k_5 = %c0_5 to %c8_5 step %c1_5 {
            %a_view_5 = aie.objectfifo.acquire @a_row1(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
            %a_5 = aie.objectfifo.subview.access %a_view_5[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
            %b_view_5 = aie.objectfifo.acquire @b_col1(Consume, 1) : !aie.objectfifosubview<memref<32x64xbf16>>
            %b_5 = aie.objectfifo.subview.access %b_view_5[0] : !aie.objectfifosubview<memref<32x64xbf16>> -> memref<32x64xbf16>
            func.call @gemm_bf16_acc_round_bt(%a_5, %b_5, %acc_1_1, %c64_i32_5, %c64_i32_5, %c32_i32_5) : (memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row1(Consume, 1)
            aie.objectfifo.release @b_col1(Consume, 1)
          }
          %c_view_5 = aie.objectfifo.acquire @c_1_1(Produce, 1) : !aie.objectfifosubview<memref<64x32xbf16>>
          %c_5 = aie.objectfifo.subview.access %c_view_5[0] : !aie.objectfifosubview<memref<64x32xbf16>> -> memref<64x32xbf16>
          func.call @gemm_bf16_store(%acc_1_1, %c_5, %c64_i32_5, %c32_i32_5) : (memref<64x32xf32>, memref<64x32xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_1_1(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_4 = aie.core(%tile_1_4) {
      %c0_6 = arith.constant 0 : index
      %c1_6 = arith.constant 1 : index
      %c9223372036854775807_6 = arith.constant 9223372036854775807 : index
      %c8_6 = arith.constant 8 : index
      %c64_i32_6 = arith.constant 64 : i32
      %c32_i32_6 = arith.constant 32 : i32
      scf.for %run_6 = %c0_6 to %c9223372036854775807_6 step %c1_6 {
        scf.for %t_6 = %c0_6 to %c8_6 step %c1_6 {
          func.call @gemm_f32_zero(%acc_1_2, %c64_i32_6, %c32_i32_6) : (memref<64x32xf32>, i32, i32) -> ()
          scf.for %k_6 = %c0_6 to %c8_6 step %c1_6 {
            %a_view_6 = aie.objectfifo.acquire @a_row2(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
            %a_6 = aie.objectfifo.subview.access %a_view_6[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
            %b_view_6 = aie.objectfifo.acquire @b_col1(Consume, 1) : !aie.objectfifosubview<memref<32x64xbf16>>
            %b_6 = aie.objectfifo.subview.access %b_view_6[0] : !aie.objectfifosubview<memref<32x64xbf16>> -> memref<32x64xbf16>
            func.call @gemm_bf16_acc_round_bt(%a_6, %b_6, %acc_1_2, %c64_i32_6, %c64_i32_6, %c32_i32_6) : (memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row2(Consume, 1)
            aie.objectfifo.release @b_col1(Consume, 1)
          }
          %c_view_6 = aie.objectfifo.acquire @c_1_2(Produce, 1) : !aie.objectfifosubview<memref<64x32xbf16>>
          %c_6 = aie.objectfifo.subview.access %c_view_6[0] : !aie.objectfifosubview<memref<64x32xbf16>> -> memref<64x32xbf16>
          func.call @gemm_bf16_store(%acc_1_2, %c_6, %c64_i32_6, %c32_i32_6) : (memref<64x32xf32>, memref<64x32xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_1_2(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_5 = aie.core(%tile_1_5) {
      %c0_7 = arith.constant 0 : index
      %c1_7 = arith.constant 1 : index
      %c9223372036854775807_7 = arith.constant 9223372036854775807 : index
      %c8_7 = arith.constant 8 : index
      %c64_i32_7 = arith.constant 64 : i32
      %c32_i32_7 = arith.constant 32 : i32
      scf.for %run_7 = %c0_7 to %c9223372036854775807_7 step %c1_7 {
        scf.for %t_7 = %c0_7 to %c8_7 step %c1_7 {
          func.call @gemm_f32_zero(%acc_1_3, %c64_i32_7, %c32_i32_7) : (memref<64x32xf32>, i32, i32) -> ()
          scf.for %k_7 = %c0_7 to %c8_7 step %c1_7 {
            %a_view_7 = aie.objectfifo.acquire @a_row3(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
            %a_7 = aie.objectfifo.subview.access %a_view_7[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
            %b_view_7 = aie.objectfifo.acquire @b_col1(Consume, 1) : !aie.objectfifosubview<memref<32x64xbf16>>
            %b_7 = aie.objectfifo.subview.access %b_view_7[0] : !aie.objectfifosubview<memref<32x64xbf16>> -> memref<32x64xbf16>
            func.call @gemm_bf16_acc_round_bt(%a_7, %b_7, %acc_1_3, %c64_i32_7, %c64_i32_7, %c32_i32_7) : (memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row3(Consume, 1)
            aie.objectfifo.release @b_col1(Consume, 1)
          }
          %c_view_7 = aie.objectfifo.acquire @c_1_3(Produce, 1) : !aie.objectfifosubview<memref<64x32xbf16>>
          %c_7 = aie.objectfifo.subview.access %c_view_7[0] : !aie.objectfifosubview<memref<64x32xbf16>> -> memref<64x32xbf16>
          func.call @gemm_bf16_store(%acc_1_3, %c_7, %c64_i32_7, %c32_i32_7) : (memref<64x32xf32>, memref<64x32xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_1_3(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%a_buf: memref<131072xbf16>, %b_buf: memref<262144xbf16>, %out_buf: memref<131072xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 8, 256, 32][0, 64, 512, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][8, 8, 128, 64][0, 64, 512, 1]) {id = 1 : i64, metadata = @a_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 0][8, 8, 32, 64][32768, 64, 512, 1]) {id = 2 : i64, metadata = @b_0} : memref<262144xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 32][1, 8, 256, 32][0, 64, 512, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 65536][8, 8, 128, 64][0, 64, 512, 1]) {id = 1 : i64, metadata = @a_1} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%b_buf[0, 0, 0, 16384][8, 8, 32, 64][32768, 64, 512, 1]) {id = 2 : i64, metadata = @b_1} : memref<262144xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
    }
  }
}
