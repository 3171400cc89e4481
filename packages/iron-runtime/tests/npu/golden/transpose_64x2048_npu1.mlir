// IRON design: Transpose(batch=None, rows=64, cols=2048, tile_rows=64, tile_cols=64, num_aie_columns=4) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    func.func private @transpose_bf16(memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) attributes {link_with = "transpose_bf16.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %shim_noc_tile_2_0 = aie.tile(2, 0)
    %shim_noc_tile_3_0 = aie.tile(3, 0)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_2 = aie.tile(3, 2)
    aie.objectfifo @x_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_1(%shim_noc_tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_1(%tile_1_2, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_2(%shim_noc_tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_2(%tile_2_2, {%shim_noc_tile_2_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @x_3(%shim_noc_tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    aie.objectfifo @out_3(%tile_3_2, {%shim_noc_tile_3_0}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c8 = arith.constant 8 : index
      %c64_i32 = arith.constant 64 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %blk = %c0 to %c8 step %c1 {
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
      %c8_1 = arith.constant 8 : index
      %c64_i32_1 = arith.constant 64 : i32
      scf.for %run_1 = %c0_1 to %c9223372036854775807_1 step %c1_1 {
        scf.for %blk_1 = %c0_1 to %c8_1 step %c1_1 {
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
      %c8_2 = arith.constant 8 : index
      %c64_i32_2 = arith.constant 64 : i32
      scf.for %run_2 = %c0_2 to %c9223372036854775807_2 step %c1_2 {
        scf.for %blk_2 = %c0_2 to %c8_2 step %c1_2 {
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
      %c8_3 = arith.constant 8 : index
      %c64_i32_3 = arith.constant 64 : i32
      scf.for %run_3 = %c0_3 to %c9223372036854775807_3 step %c1_3 {
        scf.for %blk_3 = %c0_3 to %c8_3 step %c1_3 {
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
    aie.runtime_sequence @sequence(%x_buf: memref<131072xbf16>, %out_buf: memref<131072xbf16>) {
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 8, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 8, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 512][1, 8, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_1} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 32768][1, 8, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 1024][1, 8, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_2} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 65536][1, 8, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_2} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 1536][1, 8, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_3} : memref<131072xbf16>
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 98304][1, 8, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_3} : memref<131072xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
      aiex.npu.dma_wait {symbol = @out_1}
      aiex.npu.dma_wait {symbol = @out_2}
      aiex.npu.dma_wait {symbol = @out_3}
    }
  }
}
