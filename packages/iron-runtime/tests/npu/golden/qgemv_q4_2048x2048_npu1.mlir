// IRON design: QGEMV(M=2048, K=2048, bits=4, group=32, row_bytes=1280, num_aie_columns=4, tile_m=512, tile_k=64) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    func.func private @qmatmul_f32_zero(memref<512xf32>, i32) attributes {link_with = "qmatmul.o"}
    func.func private @qgemv_acc(memref<20480xi8>, memref<64xbf16>, memref<512xf32>, i32, i32, i32, i32) attributes {link_with = "qmatmul.o"}
    func.func private @qmatmul_bf16_store(memref<512xf32>, memref<512xbf16>, i32) attributes {link_with = "qmatmul.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
    aie.objectfifo @w_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<64xbf16>>
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
    aie.objectfifo @w_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<64xbf16>>
    aie.objectfifo @out_1(%tile_1_2, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
    aie.objectfifo @w_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<64xbf16>>
    aie.objectfifo @out_2(%tile_2_2, {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
    aie.objectfifo @w_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<20480xi8>>
    aie.objectfifo @x_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<64xbf16>>
    aie.objectfifo @out_3(%tile_3_2, {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
    %acc_0 = aie.buffer(%tile_0_2) {sym_name = "acc_0"} : memref<512xf32>
    %acc_1 = aie.buffer(%tile_1_2) {sym_name = "acc_1"} : memref<512xf32>
    %acc_2 = aie.buffer(%tile_2_2) {sym_name = "acc_2"} : memref<512xf32>
    %acc_3 = aie.buffer(%tile_3_2) {sym_name = "acc_3"} : memref<512xf32>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c32 = arith.constant 32 : index
      %c512_i32 = arith.constant 512 : i32
      %c64_i32 = arith.constant 64 : i32
      %c4_i32 = arith.constant 4 : i32
      %c32_i32 = arith.constant 32 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %r = %c0 to %c1 step %c1 {
          func.call @qmatmul_f32_zero(%acc_0, %c512_i32) : (memref<512xf32>, i32) -> ()
          scf.for %k = %c0 to %c32 step %c1 {
            %w_view = aie.objectfifo.acquire @w_0(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w = aie.objectfifo.subview.access %w_view[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view = aie.objectfifo.acquire @x_0(Consume, 1) : !aie.objectfifosubview<memref<64xbf16>>
            %x = aie.objectfifo.subview.access %x_view[0] : !aie.objectfifosubview<memref<64xbf16>> -> memref<64xbf16>
            func.call @qgemv_acc(%w, %x, %acc_0, %c512_i32, %c64_i32, %c4_i32, %c32_i32) : (memref<20480xi8>, memref<64xbf16>, memref<512xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_0(Consume, 1)
            aie.objectfifo.release @x_0(Consume, 1)
          }
          %out_view = aie.objectfifo.acquire @out_0(Produce, 1) : !aie.objectfifosubview<memref<512xbf16>>
          %out = aie.objectfifo.subview.access %out_view[0] : !aie.objectfifosubview<memref<512xbf16>> -> memref<512xbf16>
          func.call @qmatmul_bf16_store(%acc_0, %out, %c512_i32) : (memref<512xf32>, memref<512xbf16>, i32) -> ()
          aie.objectfifo.release @out_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c32_1 = arith.constant 32 : index
      %c512_i32_1 = arith.constant 512 : i32
      %c64_i32_1 = arith.constant 64 : i32
      %c4_i32_1 = arith.constant 4 : i32
      %c32_i32_1 = arith.constant 32 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %r_1 = %c0_1 to %c1_1 step %c1_1 {
          func.call @qmatmul_f32_zero(%acc_1, %c512_i32_1) : (memref<512xf32>, i32) -> ()
          scf.for %k_1 = %c0_1 to %c32_1 step %c1_1 {
            %w_view_1 = aie.objectfifo.acquire @w_1(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_1 = aie.objectfifo.subview.access %w_view_1[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_1 = aie.objectfifo.acquire @x_1(Consume, 1) : !aie.objectfifosubview<memref<64xbf16>>
            %x_1 = aie.objectfifo.subview.access %x_view_1[0] : !aie.objectfifosubview<memref<64xbf16>> -> memref<64xbf16>
            func.call @qgemv_acc(%w_1, %x_1, %acc_1, %c512_i32_1, %c64_i32_1, %c4_i32_1, %c32_i32_1) : (memref<20480xi8>, memref<64xbf16>, memref<512xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_1(Consume, 1)
            aie.objectfifo.release @x_1(Consume, 1)
          }
          %out_view_1 = aie.objectfifo.acquire @out_1(Produce, 1) : !aie.objectfifosubview<memref<512xbf16>>
          %out_1 = aie.objectfifo.subview.access %out_view_1[0] : !aie.objectfifosubview<memref<512xbf16>> -> memref<512xbf16>
          func.call @qmatmul_bf16_store(%acc_1, %out_1, %c512_i32_1) : (memref<512xf32>, memref<512xbf16>, i32) -> ()
          aie.objectfifo.release @out_1(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c32_2 = arith.constant 32 : index
      %c512_i32_2 = arith.constant 512 : i32
      %c64_i32_2 = arith.constant 64 : i32
      %c4_i32_2 = arith.constant 4 : i32
      %c32_i32_2 = arith.constant 32 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %r_2 = %c0_2 to %c1_2 step %c1_2 {
          func.call @qmatmul_f32_zero(%acc_2, %c512_i32_2) : (memref<512xf32>, i32) -> ()
          scf.for %k_2 = %c0_2 to %c32_2 step %c1_2 {
            %w_view_2 = aie.objectfifo.acquire @w_2(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_2 = aie.objectfifo.subview.access %w_view_2[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_2 = aie.objectfifo.acquire @x_2(Consume, 1) : !aie.objectfifosubview<memref<64xbf16>>
            %x_2 = aie.objectfifo.subview.access %x_view_2[0] : !aie.objectfifosubview<memref<64xbf16>> -> memref<64xbf16>
            func.call @qgemv_acc(%w_2, %x_2, %acc_2, %c512_i32_2, %c64_i32_2, %c4_i32_2, %c32_i32_2) : (memref<20480xi8>, memref<64xbf16>, memref<512xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_2(Consume, 1)
            aie.objectfifo.release @x_2(Consume, 1)
          }
          %out_view_2 = aie.objectfifo.acquire @out_2(Produce, 1) : !aie.objectfifosubview<memref<512xbf16>>
          %out_2 = aie.objectfifo.subview.access %out_view_2[0] : !aie.objectfifosubview<memref<512xbf16>> -> memref<512xbf16>
          func.call @qmatmul_bf16_store(%acc_2, %out_2, %c512_i32_2) : (memref<512xf32>, memref<512xbf16>, i32) -> ()
          aie.objectfifo.release @out_2(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c32_3 = arith.constant 32 : index
      %c512_i32_3 = arith.constant 512 : i32
      %c64_i32_3 = arith.constant 64 : i32
      %c4_i32_3 = arith.constant 4 : i32
      %c32_i32_3 = arith.constant 32 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %r_3 = %c0_3 to %c1_3 step %c1_3 {
          func.call @qmatmul_f32_zero(%acc_3, %c512_i32_3) : (memref<512xf32>, i32) -> ()
          scf.for %k_3 = %c0_3 to %c32_3 step %c1_3 {
            %w_view_3 = aie.objectfifo.acquire @w_3(Consume, 1) : !aie.objectfifosubview<memref<20480xi8>>
            %w_3 = aie.objectfifo.subview.access %w_view_3[0] : !aie.objectfifosubview<memref<20480xi8>> -> memref<20480xi8>
            %x_view_3 = aie.objectfifo.acquire @x_3(Consume, 1) : !aie.objectfifosubview<memref<64xbf16>>
            %x_3 = aie.objectfifo.subview.access %x_view_3[0] : !aie.objectfifosubview<memref<64xbf16>> -> memref<64xbf16>
            func.call @qgemv_acc(%w_3, %x_3, %acc_3, %c512_i32_3, %c64_i32_3, %c4_i32_3, %c32_i32_3) : (memref<20480xi8>, memref<64xbf16>, memref<512xf32>, i32, i32, i32, i32) -> ()
            aie.objectfifo.release @w_3(Consume, 1)
            aie.objectfifo.release @x_3(Consume, 1)
          }
          %out_view_3 = aie.objectfifo.acquire @out_3(Produce, 1) : !aie.objectfifosubview<memref<512xbf16>>
          %out_3 = aie.objectfifo.subview.access %out_view_3[0] : !aie.objectfifosubview<memref<512xbf16>> -> memref<512xbf16>
          func.call @qmatmul_bf16_store(%acc_3, %out_3, %c512_i32_3) : (memref<512xf32>, memref<512xbf16>, i32) -> ()
          aie.objectfifo.release @out_3(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%w_buf: memref<2621440xi8>, %x_buf: memref<2048xbf16>, %out_buf: memref<2048xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 1, 1, 512][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 0][1, 32, 512, 40][655360, 40, 1280, 1]) {id = 1 : i64, metadata = @w_0} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_0} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 512][1, 1, 1, 512][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 655360][1, 32, 512, 40][655360, 40, 1280, 1]) {id = 1 : i64, metadata = @w_1} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_1} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1024][1, 1, 1, 512][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 1310720][1, 32, 512, 40][655360, 40, 1280, 1]) {id = 1 : i64, metadata = @w_2} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_2} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 1536][1, 1, 1, 512][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<2048xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 1966080][1, 32, 512, 40][655360, 40, 1280, 1]) {id = 1 : i64, metadata = @w_3} : memref<2621440xi8>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_3} : memref<2048xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
    }
  }
}
