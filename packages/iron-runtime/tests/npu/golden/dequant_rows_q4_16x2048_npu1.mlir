// IRON design: DequantRows(rows=16, K=2048, bits=4, group=32, row_bytes=1280) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    func.func private @qdequant_rows(memref<5120xi8>, memref<8192xbf16>, i32, i32, i32, i32) attributes {link_with = "qmatmul.o"}
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %tile_0_2 = aie.tile(0, 2)
    aie.objectfifo @w_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<5120xi8>>
    aie.objectfifo @out_0(%tile_0_2, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c4 = arith.constant 4 : index
      %c4_i32 = arith.constant 4 : i32
      %c2048_i32 = arith.constant 2048 : i32
      %c32_i32 = arith.constant 32 : i32
      scf.for %run = %c0 to %c9223372036854775807 step %c1 {
        scf.for %t = %c0 to %c4 step %c1 {
          %w_view = aie.objectfifo.acquire @w_0(Consume, 1) : !aie.objectfifosubview<memref<5120xi8>>
          %w = aie.objectfifo.subview.access %w_view[0] : !aie.objectfifosubview<memref<5120xi8>> -> memref<5120xi8>
          %out_view = aie.objectfifo.acquire @out_0(Produce, 1) : !aie.objectfifosubview<memref<8192xbf16>>
          %out = aie.objectfifo.subview.access %out_view[0] : !aie.objectfifosubview<memref<8192xbf16>> -> memref<8192xbf16>
          func.call @qdequant_rows(%w, %out, %c4_i32, %c2048_i32, %c4_i32, %c32_i32) : (memref<5120xi8>, memref<8192xbf16>, i32, i32, i32, i32) -> ()
          aie.objectfifo.release @w_0(Consume, 1)
          aie.objectfifo.release @out_0(Produce, 1)
        }
      }
      aie.end
    } {stack_size = 1024 : i32}
    aie.runtime_sequence @sequence(%w_buf: memref<20480xi8>, %out_buf: memref<32768xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 1, 32, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%w_buf[0, 0, 0, 0][1, 1, 8, 2560][0, 0, 2560, 1]) {id = 1 : i64, metadata = @w_0} : memref<20480xi8>
      aiex.npu.dma_wait {symbol = @out_0}
    }
  }
}
