// IRON design: QGEMM(M=16, K=8192, N=2048, bits=8, group=32, row_bytes=8704, num_aie_columns=8, tile_m=16, tile_n=64, tile_k=128) on npu2; mlir-aie v1.4.1
module {
  aie.device(npu2) @main {
    func.func private @qgemm_f32_zero(memref<16x64xf32>, i32, i32) attributes {link_with = "qgemm.o"}
    func.func private @qgemm_acc(memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) attributes {link_with = "qgemm.o"}
    func.func private @qgemm_bf16_store(memref<16x64xf32>, memref<16x64xbf16>, i32, i32) attributes {link_with = "qgemm.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %shim_noc_tile_4_0 = aie.tile(4, 0)
    %shim_noc_tile_5_0 = aie.tile(5, 0)
    %shim_noc_tile_6_0 = aie.tile(6, 0)
    %shim_noc_tile_7_0 = aie.tile(7, 0)
    %mem_tile_0_1 = aie.tile(0, 1)
    %mem_tile_1_1 = aie.tile(1, 1)
    %mem_tile_2_1 = aie.tile(2, 1)
    %mem_tile_3_1 = aie.tile(3, 1)
    %mem_tile_4_1 = aie.tile(4, 1)
    %mem_tile_5_1 = aie.tile(5, 1)
    %mem_tile_6_1 = aie.tile(6, 1)
    %mem_tile_7_1 = aie.tile(7, 1)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
    %tile_4_2 = aie.tile(4, 2)
    %tile_5_2 = aie.tile(5, 2)
    %tile_6_2 = aie.tile(6, 2)
    %tile_7_2 = aie.tile(7, 2)
    aie.objectfifo @a_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
    aie.objectfifo @a_row0(%mem_tile_0_1 dimensionsToStream [<size = 4, stride = 512>, <size = 16, stride = 8>, <size = 4, stride = 128>, <size = 8, stride = 1>], {%tile_0_2, %tile_1_2, %tile_2_2, %tile_3_2, %tile_4_2, %tile_5_2, %tile_6_2, %tile_7_2}, 2 : i32) : !aie.objectfifo<memref<16x128xbf16>>
    aie.objectfifo.link [@a_0] -> [@a_row0] ([] [])
    aie.objectfifo @w_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo @w_col0(%mem_tile_0_1, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo.link [@w_0] -> [@w_col0] ([] [])
    aie.objectfifo @c_0_0(%tile_0_2, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_0(%mem_tile_0_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 8>, <size = 8, stride = 32>, <size = 8, stride = 1>], {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_0_0] -> [@out_0] ([] [])
    aie.objectfifo @w_1(%shim_noc_tile_1_0, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo @w_col1(%mem_tile_1_1, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo.link [@w_1] -> [@w_col1] ([] [])
    aie.objectfifo @c_1_0(%tile_1_2, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_1(%mem_tile_1_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 8>, <size = 8, stride = 32>, <size = 8, stride = 1>], {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_1_0] -> [@out_1] ([] [])
    aie.objectfifo @w_2(%shim_noc_tile_2_0, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo @w_col2(%mem_tile_2_1, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo.link [@w_2] -> [@w_col2] ([] [])
    aie.objectfifo @c_2_0(%tile_2_2, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_2(%mem_tile_2_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 8>, <size = 8, stride = 32>, <size = 8, stride = 1>], {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_2_0] -> [@out_2] ([] [])
    aie.objectfifo @w_3(%shim_noc_tile_3_0, {%mem_tile_3_1}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo @w_col3(%mem_tile_3_1, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo.link [@w_3] -> [@w_col3] ([] [])
    aie.objectfifo @c_3_0(%tile_3_2, {%mem_tile_3_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_3(%mem_tile_3_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 8>, <size = 8, stride = 32>, <size = 8, stride = 1>], {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_3_0] -> [@out_3] ([] [])
    aie.objectfifo @w_4(%shim_noc_tile_4_0, {%mem_tile_4_1}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo @w_col4(%mem_tile_4_1, {%tile_4_2}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo.link [@w_4] -> [@w_col4] ([] [])
    aie.objectfifo @c_4_0(%tile_4_2, {%mem_tile_4_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_4(%mem_tile_4_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 8>, <size = 8, stride = 32>, <size = 8, stride = 1>], {%shim_noc_tile_4_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_4_0] -> [@out_4] ([] [])
    aie.objectfifo @w_5(%shim_noc_tile_5_0, {%mem_tile_5_1}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo @w_col5(%mem_tile_5_1, {%tile_5_2}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo.link [@w_5] -> [@w_col5] ([] [])
    aie.objectfifo @c_5_0(%tile_5_2, {%mem_tile_5_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_5(%mem_tile_5_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 8>, <size = 8, stride = 32>, <size = 8, stride = 1>], {%shim_noc_tile_5_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_5_0] -> [@out_5] ([] [])
    aie.objectfifo @w_6(%shim_noc_tile_6_0, {%mem_tile_6_1}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo @w_col6(%mem_tile_6_1, {%tile_6_2}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo.link [@w_6] -> [@w_col6] ([] [])
    aie.objectfifo @c_6_0(%tile_6_2, {%mem_tile_6_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_6(%mem_tile_6_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 8>, <size = 8, stride = 32>, <size = 8, stride = 1>], {%shim_noc_tile_6_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_6_0] -> [@out_6] ([] [])
    aie.objectfifo @w_7(%shim_noc_tile_7_0, {%mem_tile_7_1}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo @w_col7(%mem_tile_7_1, {%tile_7_2}, 2 : i32) : !aie.objectfifo<memref<8704xi8>>
    aie.objectfifo.link [@w_7] -> [@w_col7] ([] [])
    aie.objectfifo @c_7_0(%tile_7_2, {%mem_tile_7_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_7(%mem_tile_7_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 8>, <size = 8, stride = 32>, <size = 8, stride = 1>], {%shim_noc_tile_7_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_7_0] -> [@out_7] ([] [])
    %acc_0_0 = aie.buffer(%tile_0_2) {sym_name = "acc_0_0"} : memref<16x64xf32>
    %deq_0_0 = aie.buffer(%tile_0_2) {sym_name = "deq_0_0"} : memref<64x128xbf16>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c4 = arith.constant 4 : index
      %c64 = arith.constant 64 : index
      %c16_i32 = arith.constant 16 : i32
      %c128_i32 = arith.constant 128 : i32
      %c64_i32 = arith.constant 64 : i32
      %c8_i32 = arith.constant 8 : i32
      %c32_i32 = arith.constant 32 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %t = %c0 to %c4 step %c1 {
          func.call @qgemm_f32_zero(%acc_0_0, %c16_i32, %c64_i32) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k = %c0 to %c64 step %c1 {
            %a_view = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a = aie.objectfifo.subview.access %a_view[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view = aie.objectfifo.acquire @w_col0(Consume, 1) : !aie.objectfifosubview<memref<8704xi8>>
            %w = aie.objectfifo.subview.access %w_view[0] : !aie.objectfifosubview<memref<8704xi8>> -> memref<8704xi8>
            func.call @qgemm_acc(%a, %w, %acc_0_0, %deq_0_0, %c16_i32, %c128_i32, %c64_i32, %c8_i32, %c32_i32) : (memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @w_col0(Consume, 1)
          }
          %c_view = aie.objectfifo.acquire @c_0_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c = aie.objectfifo.subview.access %c_view[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @qgemm_bf16_store(%acc_0_0, %c, %c16_i32, %c64_i32) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_0_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %acc_1_0 = aie.buffer(%tile_1_2) {sym_name = "acc_1_0"} : memref<16x64xf32>
    %deq_1_0 = aie.buffer(%tile_1_2) {sym_name = "deq_1_0"} : memref<64x128xbf16>
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c4_1 = arith.constant 4 : index
      %c64_1 = arith.constant 64 : index
      %c16_i32_1 = arith.constant 16 : i32
      %c128_i32_1 = arith.constant 128 : i32
      %c64_i32_1 = arith.constant 64 : i32
      %c8_i32_1 = arith.constant 8 : i32
      %c32_i32_1 = arith.constant 32 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %t_1 = %c0_1 to %c4_1 step %c1_1 {
          func.call @qgemm_f32_zero(%acc_1_0, %c16_i32_1, %c64_i32_1) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_1 = %c0_1 to %c64_1 step %c1_1 {
            %a_view_1 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_1 = aie.objectfifo.subview.access %a_view_1[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_1 = aie.objectfifo.acquire @w_col1(Consume, 1) : !aie.objectfifosubview<memref<8704xi8>>
            %w_1 = aie.objectfifo.subview.access %w_view_1[0] : !aie.objectfifosubview<memref<8704xi8>> -> memref<8704xi8>
            func.call @qgemm_acc(%a_1, %w_1, %acc_1_0, %deq_1_0, %c16_i32_1, %c128_i32_1, %c64_i32_1, %c8_i32_1, %c32_i32_1) : (memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @w_col1(Consume, 1)
          }
          %c_view_1 = aie.objectfifo.acquire @c_1_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_1 = aie.objectfifo.subview.access %c_view_1[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @qgemm_bf16_store(%acc_1_0, %c_1, %c16_i32_1, %c64_i32_1) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_1_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %acc_2_0 = aie.buffer(%tile_2_2) {sym_name = "acc_2_0"} : memref<16x64xf32>
    %deq_2_0 = aie.buffer(%tile_2_2) {sym_name = "deq_2_0"} : memref<64x128xbf16>
    %core_2_2 = aie.core(%tile_2_2) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c4_2 = arith.constant 4 : index
      %c64_2 = arith.constant 64 : index
      %c16_i32_2 = arith.constant 16 : i32
      %c128_i32_2 = arith.constant 128 : i32
      %c64_i32_2 = arith.constant 64 : i32
      %c8_i32_2 = arith.constant 8 : i32
      %c32_i32_2 = arith.constant 32 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %t_2 = %c0_2 to %c4_2 step %c1_2 {
          func.call @qgemm_f32_zero(%acc_2_0, %c16_i32_2, %c64_i32_2) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_2 = %c0_2 to %c64_2 step %c1_2 {
            %a_view_2 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_2 = aie.objectfifo.subview.access %a_view_2[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_2 = aie.objectfifo.acquire @w_col2(Consume, 1) : !aie.objectfifosubview<memref<8704xi8>>
            %w_2 = aie.objectfifo.subview.access %w_view_2[0] : !aie.objectfifosubview<memref<8704xi8>> -> memref<8704xi8>
            func.call @qgemm_acc(%a_2, %w_2, %acc_2_0, %deq_2_0, %c16_i32_2, %c128_i32_2, %c64_i32_2, %c8_i32_2, %c32_i32_2) : (memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @w_col2(Consume, 1)
          }
          %c_view_2 = aie.objectfifo.acquire @c_2_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_2 = aie.objectfifo.subview.access %c_view_2[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @qgemm_bf16_store(%acc_2_0, %c_2, %c16_i32_2, %c64_i32_2) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_2_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %acc_3_0 = aie.buffer(%tile_3_2) {sym_name = "acc_3_0"} : memref<16x64xf32>
    %deq_3_0 = aie.buffer(%tile_3_2) {sym_name = "deq_3_0"} : memref<64x128xbf16>
    %core_3_2 = aie.core(%tile_3_2) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c4_3 = arith.constant 4 : index
      %c64_3 = arith.constant 64 : index
      %c16_i32_3 = arith.constant 16 : i32
      %c128_i32_3 = arith.constant 128 : i32
      %c64_i32_3 = arith.constant 64 : i32
      %c8_i32_3 = arith.constant 8 : i32
      %c32_i32_3 = arith.constant 32 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %t_3 = %c0_3 to %c4_3 step %c1_3 {
          func.call @qgemm_f32_zero(%acc_3_0, %c16_i32_3, %c64_i32_3) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_3 = %c0_3 to %c64_3 step %c1_3 {
            %a_view_3 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_3 = aie.objectfifo.subview.access %a_view_3[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_3 = aie.objectfifo.acquire @w_col3(Consume, 1) : !aie.objectfifosubview<memref<8704xi8>>
            %w_3 = aie.objectfifo.subview.access %w_view_3[0] : !aie.objectfifosubview<memref<8704xi8>> -> memref<8704xi8>
            func.call @qgemm_acc(%a_3, %w_3, %acc_3_0, %deq_3_0, %c16_i32_3, %c128_i32_3, %c64_i32_3, %c8_i32_3, %c32_i32_3) : (memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @w_col3(Consume, 1)
          }
          %c_view_3 = aie.objectfifo.acquire @c_3_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_3 = aie.objectfifo.subview.access %c_view_3[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @qgemm_bf16_store(%acc_3_0, %c_3, %c16_i32_3, %c64_i32_3) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_3_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %acc_4_0 = aie.buffer(%tile_4_2) {sym_name = "acc_4_0"} : memref<16x64xf32>
    %deq_4_0 = aie.buffer(%tile_4_2) {sym_name = "deq_4_0"} : memref<64x128xbf16>
    %core_4_2 = aie.core(%tile_4_2) {
      %c0_4 = arith.constant 0 : index
      %c1_4 = arith.constant 1 : index
      %c9223372036854775807_4 = arith.constant 9223372036854775807 : index
      %c4_4 = arith.constant 4 : index
      %c64_4 = arith.constant 64 : index
      %c16_i32_4 = arith.constant 16 : i32
      %c128_i32_4 = arith.constant 128 : i32
      %c64_i32_4 = arith.constant 64 : i32
      %c8_i32_4 = arith.constant 8 : i32
      %c32_i32_4 = arith.constant 32 : i32
      scf.for %run_4 = %c0_4 to %c9223372036854775807_4 step %c1_4 {
        scf.for %t_4 = %c0_4 to %c4_4 step %c1_4 {
          func.call @qgemm_f32_zero(%acc_4_0, %c16_i32_4, %c64_i32_4) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_4 = %c0_4 to %c64_4 step %c1_4 {
            %a_view_4 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_4 = aie.objectfifo.subview.access %a_view_4[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_4 = aie.objectfifo.acquire @w_col4(Consume, 1) : !aie.objectfifosubview<memref<8704xi8>>
            %w_4 = aie.objectfifo.subview.access %w_view_4[0] : !aie.objectfifosubview<memref<8704xi8>> -> memref<8704xi8>
            func.call @qgemm_acc(%a_4, %w_4, %acc_4_0, %deq_4_0, %c16_i32_4, %c128_i32_4, %c64_i32_4, %c8_i32_4, %c32_i32_4) : (memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @w_col4(Consume, 1)
          }
          %c_view_4 = aie.objectfifo.acquire @c_4_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_4 = aie.objectfifo.subview.access %c_view_4[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @qgemm_bf16_store(%acc_4_0, %c_4, %c16_i32_4, %c64_i32_4) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_4_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %acc_5_0 = aie.buffer(%tile_5_2) {sym_name = "acc_5_0"} : memref<16x64xf32>
    %deq_5_0 = aie.buffer(%tile_5_2) {sym_name = "deq_5_0"} : memref<64x128xbf16>
    %core_5_2 = aie.core(%tile_5_2) {
      %c0_5 = arith.constant 0 : index
      %c1_5 = arith.constant 1 : index
      %c9223372036854775807_5 = arith.constant 9223372036854775807 : index
      %c4_5 = arith.constant 4 : index
      %c64_5 = arith.constant 64 : index
      %c16_i32_5 = arith.constant 16 : i32
      %c128_i32_5 = arith.constant 128 : i32
      %c64_i32_5 = arith.constant 64 : i32
      %c8_i32_5 = arith.constant 8 : i32
      %c32_i32_5 = arith.constant 32 : i32
      scf.for %run_5 = %c0_5 to %c9223372036854775807_5 step %c1_5 {
        scf.for %t_5 = %c0_5 to %c4_5 step %c1_5 {
          func.call @qgemm_f32_zero(%acc_5_0, %c16_i32_5, %c64_i32_5) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_5 = %c0_5 to %c64_5 step %c1_5 {
            %a_view_5 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_5 = aie.objectfifo.subview.access %a_view_5[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_5 = aie.objectfifo.acquire @w_col5(Consume, 1) : !aie.objectfifosubview<memref<8704xi8>>
            %w_5 = aie.objectfifo.subview.access %w_view_5[0] : !aie.objectfifosubview<memref<8704xi8>> -> memref<8704xi8>
            func.call @qgemm_acc(%a_5, %w_5, %acc_5_0, %deq_5_0, %c16_i32_5, %c128_i32_5, %c64_i32_5, %c8_i32_5, %c32_i32_5) : (memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @w_col5(Consume, 1)
          }
          %c_view_5 = aie.objectfifo.acquire @c_5_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_5 = aie.objectfifo.subview.access %c_view_5[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @qgemm_bf16_store(%acc_5_0, %c_5, %c16_i32_5, %c64_i32_5) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_5_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %acc_6_0 = aie.buffer(%tile_6_2) {sym_name = "acc_6_0"} : memref<16x64xf32>
    %deq_6_0 = aie.buffer(%tile_6_2) {sym_name = "deq_6_0"} : memref<64x128xbf16>
    %core_6_2 = aie.core(%tile_6_2) {
      %c0_6 = arith.constant 0 : index
      %c1_6 = arith.constant 1 : index
      %c9223372036854775807_6 = arith.constant 9223372036854775807 : index
      %c4_6 = arith.constant 4 : index
      %c64_6 = arith.constant 64 : index
      %c16_i32_6 = arith.constant 16 : i32
      %c128_i32_6 = arith.constant 128 : i32
      %c64_i32_6 = arith.constant 64 : i32
      %c8_i32_6 = arith.constant 8 : i32
      %c32_i32_6 = arith.constant 32 : i32
      scf.for %run_6 = %c0_6 to %c9223372036854775807_6 step %c1_6 {
        scf.for %t_6 = %c0_6 to %c4_6 step %c1_6 {
          func.call @qgemm_f32_zero(%acc_6_0, %c16_i32_6, %c64_i32_6) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_6 = %c0_6 to %c64_6 step %c1_6 {
            %a_view_6 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_6 = aie.objectfifo.subview.access %a_view_6[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_6 = aie.objectfifo.acquire @w_col6(Consume, 1) : !aie.objectfifosubview<memref<8704xi8>>
            %w_6 = aie.objectfifo.subview.access %w_view_6[0] : !aie.objectfifosubview<memref<8704xi8>> -> memref<8704xi8>
            func.call @qgemm_acc(%a_6, %w_6, %acc_6_0, %deq_6_0, %c16_i32_6, %c128_i32_6, %c64_i32_6, %c8_i32_6, %c32_i32_6) : (memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @w_col6(Consume, 1)
          }
          %c_view_6 = aie.objectfifo.acquire @c_6_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_6 = aie.objectfifo.subview.access %c_view_6[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @qgemm_bf16_store(%acc_6_0, %c_6, %c16_i32_6, %c64_i32_6) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_6_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %acc_7_0 = aie.buffer(%tile_7_2) {sym_name = "acc_7_0"} : memref<16x64xf32>
    %deq_7_0 = aie.buffer(%tile_7_2) {sym_name = "deq_7_0"} : memref<64x128xbf16>
    %core_7_2 = aie.core(%tile_7_2) {
      %c0_7 = arith.constant 0 : index
      %c1_7 = arith.constant 1 : index
      %c9223372036854775807_7 = arith.constant 9223372036854775807 : index
      %c4_7 = arith.constant 4 : index
      %c64_7 = arith.constant 64 : index
      %c16_i32_7 = arith.constant 16 : i32
      %c128_i32_7 = arith.constant 128 : i32
      %c64_i32_7 = arith.constant 64 : i32
      %c8_i32_7 = arith.constant 8 : i32
      %c32_i32_7 = arith.constant 32 : i32
      scf.for %run_7 = %c0_7 to %c9223372036854775807_7 step %c1_7 {
        scf.for %t_7 = %c0_7 to %c4_7 step %c1_7 {
          func.call @qgemm_f32_zero(%acc_7_0, %c16_i32_7, %c64_i32_7) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_7 = %c0_7 to %c64_7 step %c1_7 {
            %a_view_7 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_7 = aie.objectfifo.subview.access %a_view_7[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_7 = aie.objectfifo.acquire @w_col7(Consume, 1) : !aie.objectfifosubview<memref<8704xi8>>
            %w_7 = aie.objectfifo.subview.access %w_view_7[0] : !aie.objectfifosubview<memref<8704xi8>> -> memref<8704xi8>
            func.call @qgemm_acc(%a_7, %w_7, %acc_7_0, %deq_7_0, %c16_i32_7, %c128_i32_7, %c64_i32_7, %c8_i32_7, %c32_i32_7) : (memref<16x128xbf16>, memref<8704xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @a_row0(Consume, 1)
            aie.objectfifo.release @w_col7(Consume, 1)
          }
          %c_view_7 = aie.objectfifo.acquire @c_7_0(Produce, 1) : !aie.objectfifosubview<memref<16x64xbf16>>
          %c_7 = aie.objectfifo.subview.access %c_view_7[0] : !aie.objectfifosubview<memref<16x64xbf16>> -> memref<16x64xbf16>
          func.call @qgemm_bf16_store(%acc_7_0, %c_7, %c16_i32_7, %c64_i32_7) : (memref<16x64xf32>, memref<16x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @c_7_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%a_buf: memref<131072xbf16>, %w_buf: memref<17825792xi8>, %out_buf: memref<32768xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 4, 16, 64][0, 512, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][4, 64, 16, 128][0, 128, 8192, 1]) {id = 1 : i64, metadata = @a_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 0][1, 64, 64, 136][0, 136, 8704, 1]) {id = 2 : i64, metadata = @w_0} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 4456448][1, 64, 64, 136][0, 136, 8704, 1]) {id = 3 : i64, metadata = @w_0} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 8912896][1, 64, 64, 136][0, 136, 8704, 1]) {id = 4 : i64, metadata = @w_0} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 13369344][1, 64, 64, 136][0, 136, 8704, 1]) {id = 5 : i64, metadata = @w_0} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 64][1, 4, 16, 64][0, 512, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 557056][1, 64, 64, 136][0, 136, 8704, 1]) {id = 1 : i64, metadata = @w_1} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 5013504][1, 64, 64, 136][0, 136, 8704, 1]) {id = 2 : i64, metadata = @w_1} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 9469952][1, 64, 64, 136][0, 136, 8704, 1]) {id = 3 : i64, metadata = @w_1} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 13926400][1, 64, 64, 136][0, 136, 8704, 1]) {id = 4 : i64, metadata = @w_1} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 128][1, 4, 16, 64][0, 512, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 1114112][1, 64, 64, 136][0, 136, 8704, 1]) {id = 1 : i64, metadata = @w_2} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 5570560][1, 64, 64, 136][0, 136, 8704, 1]) {id = 2 : i64, metadata = @w_2} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 10027008][1, 64, 64, 136][0, 136, 8704, 1]) {id = 3 : i64, metadata = @w_2} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 14483456][1, 64, 64, 136][0, 136, 8704, 1]) {id = 4 : i64, metadata = @w_2} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 192][1, 4, 16, 64][0, 512, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 1671168][1, 64, 64, 136][0, 136, 8704, 1]) {id = 1 : i64, metadata = @w_3} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 6127616][1, 64, 64, 136][0, 136, 8704, 1]) {id = 2 : i64, metadata = @w_3} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 10584064][1, 64, 64, 136][0, 136, 8704, 1]) {id = 3 : i64, metadata = @w_3} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 15040512][1, 64, 64, 136][0, 136, 8704, 1]) {id = 4 : i64, metadata = @w_3} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 256][1, 4, 16, 64][0, 512, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_4} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 2228224][1, 64, 64, 136][0, 136, 8704, 1]) {id = 1 : i64, metadata = @w_4} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 6684672][1, 64, 64, 136][0, 136, 8704, 1]) {id = 2 : i64, metadata = @w_4} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 11141120][1, 64, 64, 136][0, 136, 8704, 1]) {id = 3 : i64, metadata = @w_4} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 15597568][1, 64, 64, 136][0, 136, 8704, 1]) {id = 4 : i64, metadata = @w_4} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 320][1, 4, 16, 64][0, 512, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_5} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 2785280][1, 64, 64, 136][0, 136, 8704, 1]) {id = 1 : i64, metadata = @w_5} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 7241728][1, 64, 64, 136][0, 136, 8704, 1]) {id = 2 : i64, metadata = @w_5} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 11698176][1, 64, 64, 136][0, 136, 8704, 1]) {id = 3 : i64, metadata = @w_5} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 16154624][1, 64, 64, 136][0, 136, 8704, 1]) {id = 4 : i64, metadata = @w_5} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 384][1, 4, 16, 64][0, 512, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_6} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 3342336][1, 64, 64, 136][0, 136, 8704, 1]) {id = 1 : i64, metadata = @w_6} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 7798784][1, 64, 64, 136][0, 136, 8704, 1]) {id = 2 : i64, metadata = @w_6} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 12255232][1, 64, 64, 136][0, 136, 8704, 1]) {id = 3 : i64, metadata = @w_6} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 16711680][1, 64, 64, 136][0, 136, 8704, 1]) {id = 4 : i64, metadata = @w_6} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 448][1, 4, 16, 64][0, 512, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_7} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 3899392][1, 64, 64, 136][0, 136, 8704, 1]) {id = 1 : i64, metadata = @w_7} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 8355840][1, 64, 64, 136][0, 136, 8704, 1]) {id = 2 : i64, metadata = @w_7} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 12812288][1, 64, 64, 136][0, 136, 8704, 1]) {id = 3 : i64, metadata = @w_7} : memref<17825792xi8>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 17268736][1, 64, 64, 136][0, 136, 8704, 1]) {id = 4 : i64, metadata = @w_7} : memref<17825792xi8>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
      aiex.npu.dma_wait {symbol = @out_4}
      aiex.npu.dma_wait {symbol = @out_5}
      aiex.npu.dma_wait {symbol = @out_6}
      aiex.npu.dma_wait {symbol = @out_7}
    }
  }
}
