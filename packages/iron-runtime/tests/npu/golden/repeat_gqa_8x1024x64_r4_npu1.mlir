// IRON design: Repeat(rows=8, row_shape=(1024, 64), repeat=4, itemsize=2) on npu1; mlir-aie v1.4.1
module {
  aie.device(npu1) @main {
    %shim_noc_tile_0_0 = aie.tile(0, 0)
    %mem_tile_0_1 = aie.tile(0, 1)
    aie.objectfifo @x_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<16384xbf16>>
    aie.objectfifo @out_0(%mem_tile_0_1, {%shim_noc_tile_0_0}, 2 : i32) : !aie.objectfifo<memref<16384xbf16>>
    aie.objectfifo.link [@x_0] -> [@out_0]([] [])
    aie.runtime_sequence @sequence(%x_buf: memref<524288xbf16>, %out_buf: memref<2097152xbf16>) {
      aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0][4, 8, 64, 1024][65536, 262144, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<2097152xbf16>
      aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][4, 8, 64, 1024][0, 65536, 1024, 1]) {id = 1 : i64, metadata = @x_0} : memref<524288xbf16>
      aiex.npu.dma_wait {symbol = @out_0}
    }
  }
}
