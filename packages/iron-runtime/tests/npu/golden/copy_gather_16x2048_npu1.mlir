// IRON design: Copy(shape=(16, 2048), itemsize=2, access=gather(@262144000 2048; @20287488 2048; @22528 2048; +13)) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %shim_noc_tile_1_0 = aie.tile(1, 0)
    %mem_tile_0_1 = aie.tile(0, 1)
    aie.objectfifo @view_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
    aie.objectfifo @out_0(%mem_tile_0_1, {%shim_noc_tile_1_0}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
    aie.objectfifo.link [@view_0] -> [@out_0]([] [])
    aie.runtime_sequence @sequence(%view_buf: memref<262146048xbf16>, %out_buf: memref<32768xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][1, 1, 32, 1024][0, 0, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<32768xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 262144000][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 0 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 20287488][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 1 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 22528][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 3926016][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 3 : i64, issue_token = true, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_wait {symbol = @view_0}
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 765952][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 4 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 540672][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 5 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 2654208][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 6 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 645120][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 7 : i64, issue_token = true, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_wait {symbol = @view_0}
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 571392][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 8 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 13312000][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 9 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 3371008][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 10 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 26624][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 11 : i64, issue_token = true, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_wait {symbol = @view_0}
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 1183744][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 12 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 8318976][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 13 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 29077504][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 14 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_memcpy_nd(%view_buf[0, 0, 0, 81786880][1, 1, 2, 1024][0, 0, 1024, 1]) {id = 15 : i64, metadata = @view_0} : memref<262146048xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
    }
  }
}
