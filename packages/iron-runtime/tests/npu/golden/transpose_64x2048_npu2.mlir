// IRON design: Transpose(batch=None, rows=64, cols=2048, tile_rows=64, tile_cols=64, num_aie_columns=8) on npu2; mlir-aie v1.4.1
module {
  aie.device(npu2) @main {
    func.func private @transpose_bf16(memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) attributes {link_with = "transpose_bf16.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %shim_noc_tile_4_0 = aie.tile(4, 0)
    %shim_noc_tile_5_0 = aie.tile(5, 0)
    %shim_noc_tile_6_0 = aie.tile(6, 0)
    %shim_noc_tile_7_0 = aie.tile(7, 0)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
    %tile_4_2 = aie.tile(4, 2)
    %tile_5_2 = aie.tile(5, 2)
    %tile_6_2 = aie.tile(6, 2)
    %tile_7_2 = aie.tile(7, 2)
    aie.objectfifo @x_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_1(%tile_1_2, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_2(%tile_2_2, {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_3(%tile_3_2, {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_4(%shim_noc_tile_4_0, {%tile_4_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_4(%tile_4_2, {%shim_noc_tile_4_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_5(%shim_noc_tile_5_0, {%tile_5_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_5(%tile_5_2, {%shim_noc_tile_5_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_6(%shim_noc_tile_6_0, {%tile_6_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_6(%tile_6_2, {%shim_noc_tile_6_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_7(%shim_noc_tile_7_0, {%tile_7_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_7(%tile_7_2, {%shim_noc_tile_7_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c4 = arith.constant 4 : index
      %c64_i32 = arith.constant 64 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %blk = %c0 to %c4 step %c1 {
          %x_view = aie.objectfifo.acquire @x_0(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %x = aie.objectfifo.subview.access %x_view[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          %out_view = aie.objectfifo.acquire @out_0(Produce, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %out = aie.objectfifo.subview.access %out_view[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          func.call @transpose_bf16(%x, %out, %c64_i32, %c64_i32) : (memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @x_0(Consume, 1)
          aie.objectfifo.release @out_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0_1 = arith.constant 0 : index
      %c1_1 = arith.constant 1 : index
      %c9223372036854775807_1 = arith.constant 9223372036854775807 : index
      %c4_1 = arith.constant 4 : index
      %c64_i32_1 = arith.constant 64 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %blk_1 = %c0_1 to %c4_1 step %c1_1 {
          %x_view_1 = aie.objectfifo.acquire @x_1(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %x_1 = aie.objectfifo.subview.access %x_view_1[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          %out_view_1 = aie.objectfifo.acquire @out_1(Produce, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %out_1 = aie.objectfifo.subview.access %out_view_1[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          func.call @transpose_bf16(%x_1, %out_1, %c64_i32_1, %c64_i32_1) : (memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @x_1(Consume, 1)
          aie.objectfifo.release @out_1(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0_2 = arith.constant 0 : index
      %c1_2 = arith.constant 1 : index
      %c9223372036854775807_2 = arith.constant 9223372036854775807 : index
      %c4_2 = arith.constant 4 : index
      %c64_i32_2 = arith.constant 64 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %blk_2 = %c0_2 to %c4_2 step %c1_2 {
          %x_view_2 = aie.objectfifo.acquire @x_2(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %x_2 = aie.objectfifo.subview.access %x_view_2[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          %out_view_2 = aie.objectfifo.acquire @out_2(Produce, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %out_2 = aie.objectfifo.subview.access %out_view_2[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          func.call @transpose_bf16(%x_2, %out_2, %c64_i32_2, %c64_i32_2) : (memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @x_2(Consume, 1)
          aie.objectfifo.release @out_2(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0_3 = arith.constant 0 : index
      %c1_3 = arith.constant 1 : index
      %c9223372036854775807_3 = arith.constant 9223372036854775807 : index
      %c4_3 = arith.constant 4 : index
      %c64_i32_3 = arith.constant 64 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %blk_3 = %c0_3 to %c4_3 step %c1_3 {
          %x_view_3 = aie.objectfifo.acquire @x_3(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %x_3 = aie.objectfifo.subview.access %x_view_3[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          %out_view_3 = aie.objectfifo.acquire @out_3(Produce, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %out_3 = aie.objectfifo.subview.access %out_view_3[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          func.call @transpose_bf16(%x_3, %out_3, %c64_i32_3, %c64_i32_3) : (memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @x_3(Consume, 1)
          aie.objectfifo.release @out_3(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_4_2 = aie.core(%tile_4_2) {
      %c0_4 = arith.constant 0 : index
      %c1_4 = arith.constant 1 : index
      %c9223372036854775807_4 = arith.constant 9223372036854775807 : index
      %c4_4 = arith.constant 4 : index
      %c64_i32_4 = arith.constant 64 : i32
      scf.for %run_4 = %c0_4 to %c9223372036854775807_4 step %c1_4 {
        scf.for %blk_4 = %c0_4 to %c4_4 step %c1_4 {
          %x_view_4 = aie.objectfifo.acquire @x_4(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %x_4 = aie.objectfifo.subview.access %x_view_4[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          %out_view_4 = aie.objectfifo.acquire @out_4(Produce, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %out_4 = aie.objectfifo.subview.access %out_view_4[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          func.call @transpose_bf16(%x_4, %out_4, %c64_i32_4, %c64_i32_4) : (memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @x_4(Consume, 1)
          aie.objectfifo.release @out_4(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_5_2 = aie.core(%tile_5_2) {
      %c0_5 = arith.constant 0 : index
      %c1_5 = arith.constant 1 : index
      %c9223372036854775807_5 = arith.constant 9223372036854775807 : index
      %c4_5 = arith.constant 4 : index
      %c64_i32_5 = arith.constant 64 : i32
      scf.for %run_5 = %c0_5 to %c9223372036854775807_5 step %c1_5 {
        scf.for %blk_5 = %c0_5 to %c4_5 step %c1_5 {
          %x_view_5 = aie.objectfifo.acquire @x_5(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %x_5 = aie.objectfifo.subview.access %x_view_5[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          %out_view_5 = aie.objectfifo.acquire @out_5(Produce, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %out_5 = aie.objectfifo.subview.access %out_view_5[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          func.call @transpose_bf16(%x_5, %out_5, %c64_i32_5, %c64_i32_5) : (memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @x_5(Consume, 1)
          aie.objectfifo.release @out_5(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_6_2 = aie.core(%tile_6_2) {
      %c0_6 = arith.constant 0 : index
      %c1_6 = arith.constant 1 : index
      %c9223372036854775807_6 = arith.constant 9223372036854775807 : index
      %c4_6 = arith.constant 4 : index
      %c64_i32_6 = arith.constant 64 : i32
      scf.for %run_6 = %c0_6 to %c9223372036854775807_6 step %c1_6 {
        scf.for %blk_6 = %c0_6 to %c4_6 step %c1_6 {
          %x_view_6 = aie.objectfifo.acquire @x_6(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %x_6 = aie.objectfifo.subview.access %x_view_6[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          %out_view_6 = aie.objectfifo.acquire @out_6(Produce, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %out_6 = aie.objectfifo.subview.access %out_view_6[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          func.call @transpose_bf16(%x_6, %out_6, %c64_i32_6, %c64_i32_6) : (memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @x_6(Consume, 1)
          aie.objectfifo.release @out_6(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    %core_7_2 = aie.core(%tile_7_2) {
      %c0_7 = arith.constant 0 : index
      %c1_7 = arith.constant 1 : index
      %c9223372036854775807_7 = arith.constant 9223372036854775807 : index
      %c4_7 = arith.constant 4 : index
      %c64_i32_7 = arith.constant 64 : i32
      scf.for %run_7 = %c0_7 to %c9223372036854775807_7 step %c1_7 {
        scf.for %blk_7 = %c0_7 to %c4_7 step %c1_7 {
          %x_view_7 = aie.objectfifo.acquire @x_7(Consume, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %x_7 = aie.objectfifo.subview.access %x_view_7[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          %out_view_7 = aie.objectfifo.acquire @out_7(Produce, 1) : !aie.objectfifosubview<memref<64x64xbf16>>
          %out_7 = aie.objectfifo.subview.access %out_view_7[0] : !aie.objectfifosubview<memref<64x64xbf16>> -> memref<64x64xbf16>
          func.call @transpose_bf16(%x_7, %out_7, %c64_i32_7, %c64_i32_7) : (memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) -> ()
          aie.objectfifo.release @x_7(Consume, 1)
          aie.objectfifo.release @out_7(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%x_buf: memref<131072xbf16>, %out_buf: memref<131072xbf16>) {
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 256][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_1} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 16384][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 512][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_2} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 32768][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 768][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_3} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 49152][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 1024][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_4} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 65536][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_4} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 1280][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_5} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 81920][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_5} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 1536][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_6} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 98304][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_6} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 1792][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_7} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 114688][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_7} : memref<131072xbf16>
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
