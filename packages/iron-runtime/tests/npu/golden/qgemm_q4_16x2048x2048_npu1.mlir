// IRON design: QGEMM(M=16, K=2048, N=2048, bits=4, group=32, row_bytes=1280, num_aie_columns=4, tile_m=16, tile_n=64, tile_k=128) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    func.func private @qgemm_f32_zero(memref<16x64xf32>, i32, i32) attributes {link_with = "qgemm.o"}
    func.func private @qgemm_acc(memref<16x128xbf16>, memref<5120xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) attributes {link_with = "qgemm.o"}
    func.func private @qgemm_bf16_store(memref<16x64xf32>, memref<16x64xbf16>, i32, i32) attributes {link_with = "qgemm.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %mem_tile_0_1 = aie.tile(0, 1)
    %mem_tile_1_1 = aie.tile(1, 1)
    %mem_tile_2_1 = aie.tile(2, 1)
    %mem_tile_3_1 = aie.tile(3, 1)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
    aie.objectfifo @a_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
    aie.objectfifo @a_row0(%mem_tile_0_1 dimensionsToStream [<size = 4, stride = 512>, <size = 16, stride = 8>, <size = 4, stride = 128>, <size = 8, stride = 1>], {%tile_0_2, %tile_1_2, %tile_2_2, %tile_3_2}, 2 : i32) : !aie.objectfifo<memref<16x128xbf16>>
    aie.objectfifo.link [@a_0] -> [@a_row0] ([] [])
    aie.objectfifo @w_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo @w_col0(%mem_tile_0_1, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo.link [@w_0] -> [@w_col0] ([] [])
    aie.objectfifo @c_0_0(%tile_0_2, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_0(%mem_tile_0_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_0_0] -> [@out_0] ([] [])
    aie.objectfifo @w_1(%shim_noc_tile_1_0, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo @w_col1(%mem_tile_1_1, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo.link [@w_1] -> [@w_col1] ([] [])
    aie.objectfifo @c_1_0(%tile_1_2, {%mem_tile_1_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_1(%mem_tile_1_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_1_0] -> [@out_1] ([] [])
    aie.objectfifo @w_2(%shim_noc_tile_2_0, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo @w_col2(%mem_tile_2_1, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo.link [@w_2] -> [@w_col2] ([] [])
    aie.objectfifo @c_2_0(%tile_2_2, {%mem_tile_2_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_2(%mem_tile_2_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_2_0] -> [@out_2] ([] [])
    aie.objectfifo @w_3(%shim_noc_tile_3_0, {%mem_tile_3_1}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo @w_col3(%mem_tile_3_1, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo.link [@w_3] -> [@w_col3] ([] [])
    aie.objectfifo @c_3_0(%tile_3_2, {%mem_tile_3_1}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
    aie.objectfifo @out_3(%mem_tile_3_1 dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo.link [@c_3_0] -> [@out_3] ([] [])
    %acc_0_0 = aie.buffer(%tile_0_2) {sym_name = "acc_0_0"} : memref<16x64xf32>
    %deq_0_0 = aie.buffer(%tile_0_2) {sym_name = "deq_0_0"} : memref<64x128xbf16>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c16_i32 = arith.constant 16 : i32
      %c128_i32 = arith.constant 128 : i32
      %c64_i32 = arith.constant 64 : i32
      %c4_i32 = arith.constant 4 : i32
      %c32_i32 = arith.constant 32 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %t = %c0 to %c8 step %c1 {
          func.call @qgemm_f32_zero(%acc_0_0, %c16_i32, %c64_i32) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k = %c0 to %c16 step %c1 {
            %a_view = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a = aie.objectfifo.subview.access %a_view[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view = aie.objectfifo.acquire @w_col0(Consume, 1) : !aie.objectfifosubview<memref<5120xi8>>
            %w = aie.objectfifo.subview.access %w_view[0] : !aie.objectfifosubview<memref<5120xi8>> -> memref<5120xi8>
            func.call @qgemm_acc(%a, %w, %acc_0_0, %deq_0_0, %c16_i32, %c128_i32, %c64_i32, %c4_i32, %c32_i32) : (memref<16x128xbf16>, memref<5120xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
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
      %c8_1 = arith.constant 8 : index
      %c16_1 = arith.constant 16 : index
      %c16_i32_1 = arith.constant 16 : i32
      %c128_i32_1 = arith.constant 128 : i32
      %c64_i32_1 = arith.constant 64 : i32
      %c4_i32_1 = arith.constant 4 : i32
      %c32_i32_1 = arith.constant 32 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %t_1 = %c0_1 to %c8_1 step %c1_1 {
          func.call @qgemm_f32_zero(%acc_1_0, %c16_i32_1, %c64_i32_1) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_1 = %c0_1 to %c16_1 step %c1_1 {
            %a_view_1 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_1 = aie.objectfifo.subview.access %a_view_1[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_1 = aie.objectfifo.acquire @w_col1(Consume, 1) : !aie.objectfifosubview<memref<5120xi8>>
            %w_1 = aie.objectfifo.subview.access %w_view_1[0] : !aie.objectfifosubview<memref<5120xi8>> -> memref<5120xi8>
            func.call @qgemm_acc(%a_1, %w_1, %acc_1_0, %deq_1_0, %c16_i32_1, %c128_i32_1, %c64_i32_1, %c4_i32_1, %c32_i32_1) : (memref<16x128xbf16>, memref<5120xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
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
      %c8_2 = arith.constant 8 : index
      %c16_2 = arith.constant 16 : index
      %c16_i32_2 = arith.constant 16 : i32
      %c128_i32_2 = arith.constant 128 : i32
      %c64_i32_2 = arith.constant 64 : i32
      %c4_i32_2 = arith.constant 4 : i32
      %c32_i32_2 = arith.constant 32 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %t_2 = %c0_2 to %c8_2 step %c1_2 {
          func.call @qgemm_f32_zero(%acc_2_0, %c16_i32_2, %c64_i32_2) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_2 = %c0_2 to %c16_2 step %c1_2 {
            %a_view_2 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_2 = aie.objectfifo.subview.access %a_view_2[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_2 = aie.objectfifo.acquire @w_col2(Consume, 1) : !aie.objectfifosubview<memref<5120xi8>>
            %w_2 = aie.objectfifo.subview.access %w_view_2[0] : !aie.objectfifosubview<memref<5120xi8>> -> memref<5120xi8>
            func.call @qgemm_acc(%a_2, %w_2, %acc_2_0, %deq_2_0, %c16_i32_2, %c128_i32_2, %c64_i32_2, %c4_i32_2, %c32_i32_2) : (memref<16x128xbf16>, memref<5120xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
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
      %c8_3 = arith.constant 8 : index
      %c16_3 = arith.constant 16 : index
      %c16_i32_3 = arith.constant 16 : i32
      %c128_i32_3 = arith.constant 128 : i32
      %c64_i32_3 = arith.constant 64 : i32
      %c4_i32_3 = arith.constant 4 : i32
      %c32_i32_3 = arith.constant 32 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %t_3 = %c0_3 to %c8_3 step %c1_3 {
          func.call @qgemm_f32_zero(%acc_3_0, %c16_i32_3, %c64_i32_3) : (memref<16x64xf32>, i32, i32) -> ()
          scf.for %k_3 = %c0_3 to %c16_3 step %c1_3 {
            %a_view_3 = aie.objectfifo.acquire @a_row0(Consume, 1) : !aie.objectfifosubview<memref<16x128xbf16>>
            %a_3 = aie.objectfifo.subview.access %a_view_3[0] : !aie.objectfifosubview<memref<16x128xbf16>> -> memref<16x128xbf16>
            %w_view_3 = aie.objectfifo.acquire @w_col3(Consume, 1) : !aie.objectfifosubview<memref<5120xi8>>
            %w_3 = aie.objectfifo.subview.access %w_view_3[0] : !aie.objectfifosubview<memref<5120xi8>> -> memref<5120xi8>
            func.call @qgemm_acc(%a_3, %w_3, %acc_3_0, %deq_3_0, %c16_i32_3, %c128_i32_3, %c64_i32_3, %c4_i32_3, %c32_i32_3) : (memref<16x128xbf16>, memref<5120xi8>, memref<16x64xf32>, memref<64x128xbf16>, i32, i32, i32, i32, i32) -> ()
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
    aie.runtime_sequence @sequence(%a_buf: memref<32768xbf16>, %w_buf: memref<2621440xi8>, %out_buf: memref<32768xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 8, 16, 64][0, 256, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%a_buf[0, 0, 0, 0][8, 16, 16, 128][0, 128, 2048, 1]) {id = 1 : i64, metadata = @a_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 0][8, 16, 64, 80][327680, 80, 1280, 1]) {id = 2 : i64, metadata = @w_0} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 64][1, 8, 16, 64][0, 256, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 81920][8, 16, 64, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_1} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 128][1, 8, 16, 64][0, 256, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 163840][8, 16, 64, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_2} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 192][1, 8, 16, 64][0, 256, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 245760][8, 16, 64, 80][327680, 80, 1280, 1]) {id = 1 : i64, metadata = @w_3} : memref<2621440xi8>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
    }
  }
}
